// Preloaded (node --require) into the npm programs the tests start (server-everything, the
// conformance suite's mock servers), so a server that listens on a bare port listens on
// 127.0.0.1 only, never on every interface.
//
// Binding to an explicit host is asynchronous in Node, while some callers read
// `server.address().port` right after `listen(0)`; so port 0 is replaced by a free port
// chosen up front, and `address()` answers with it until the bind completes.
const net = require("net");
const { execFileSync } = require("child_process");

const listen = net.Server.prototype.listen;
const address = net.Server.prototype.address;

function freePort() {
  const script =
    "const s=require('net').createServer();s.listen(0,'127.0.0.1',()=>{" +
    "process.stdout.write(String(s.address().port));s.close();});";
  return Number(execFileSync(process.execPath, ["-e", script], { env: {} }).toString());
}

net.Server.prototype.listen = function (...args) {
  let first = args[0];
  if (first && typeof first === "object" && first.port !== undefined && !first.host) {
    args = [first.port, ...args.slice(1)];
    first = args[0];
  }
  const isPort = typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first));
  if (isPort && typeof args[1] !== "string") {
    const port = Number(first) === 0 ? freePort() : Number(first);
    args[0] = port;
    args.splice(1, 0, "127.0.0.1");
    this.__loopbackPort = port;
  }
  return listen.apply(this, args);
};

net.Server.prototype.address = function () {
  const real = address.apply(this);
  if (real === null && this.__loopbackPort !== undefined) {
    return { address: "127.0.0.1", family: "IPv4", port: this.__loopbackPort };
  }
  return real;
};
