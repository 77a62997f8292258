// legato web UI: Markdown to DOM nodes, written for this page.
// Safety: nothing is ever parsed as HTML. Every piece of text becomes a text node, every
// element is made with createElement, so a model's `<img onerror=...>` shows as text.
// Links keep only http(s) and mailto targets and open in a new tab without a referrer.
"use strict";

const MD_SAFE_URL = /^(https?:\/\/|mailto:)/i;

function mdEl(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// Inline spans: `code`, **strong**, *em* / _em_, ~~del~~, [text](url), bare URLs.
const MD_INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([^*]+?)\*\*|__([^_]+?)__|\*([^*\s][^*]*?)\*|(?<![\w])_([^_\s][^_]*?)_(?![\w])|~~([^~]+?)~~|\[([^\]]+)\]\(([^)\s]+)\)|(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/g;

function mdInline(text, into) {
  let last = 0;
  for (const m of text.matchAll(MD_INLINE)) {
    if (m.index > last) into.append(document.createTextNode(text.slice(last, m.index)));
    last = m.index + m[0].length;
    if (m[1]) into.append(mdEl("code", null, m[2].trim() ? m[2].replace(/^ (.*) $/s, "$1") : m[2]));
    else if (m[3] || m[4]) mdInline(m[3] || m[4], into.appendChild(mdEl("strong")));
    else if (m[5] || m[6]) mdInline(m[5] || m[6], into.appendChild(mdEl("em")));
    else if (m[7]) mdInline(m[7], into.appendChild(mdEl("del")));
    else if (m[8]) into.append(mdLink(m[8], m[9]));
    else if (m[10]) into.append(mdLink(m[10], m[10]));
  }
  if (last < text.length) into.append(document.createTextNode(text.slice(last)));
}

function mdLink(label, url) {
  if (!MD_SAFE_URL.test(url)) return document.createTextNode(`${label} (${url})`);
  const a = mdEl("a");
  a.href = url;
  a.target = "_blank";
  a.rel = "noopener noreferrer nofollow";
  mdInline(label, a);
  return a;
}

// A light highlighter for code blocks: strings, comments, numbers and common keywords.
const MD_KEYWORDS = new Set(("def class return if elif else for while in not and or import from as with try except " +
  "finally raise async await yield lambda pass break continue None True False function const let var new this " +
  "null undefined true false fn pub struct impl match use mut type interface export default switch case").split(" "));
const MD_TOKEN = /(#[^\n]*|\/\/[^\n]*|\/\*[\s\S]*?\*\/)|("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\]|\\.)*`)|(\b\d[\d_.]*(?:e[+-]?\d+)?\b)|([A-Za-z_][\w]*)/g;

function mdCode(code, lang) {
  const pre = mdEl("pre", "code-block");
  const codeNode = mdEl("code");
  if (lang) { codeNode.dataset.lang = lang; pre.dataset.lang = lang; }
  const plain = ["", "text", "txt", "plain"].includes(lang) || code.length > 20000;
  let last = 0;
  if (!plain) {
    for (const m of code.matchAll(MD_TOKEN)) {
      if (m[4] && !MD_KEYWORDS.has(m[4])) continue;
      if (m[1] && m[1].startsWith("#") && !["python", "py", "sh", "bash", "shell", "yaml", "toml", "ruby"].includes(lang)) continue;
      if (m.index > last) codeNode.append(document.createTextNode(code.slice(last, m.index)));
      const kind = m[1] ? "tok-comment" : m[2] ? "tok-string" : m[3] ? "tok-number" : "tok-keyword";
      codeNode.append(mdEl("span", kind, m[0]));
      last = m.index + m[0].length;
    }
  }
  codeNode.append(document.createTextNode(code.slice(last)));
  pre.append(codeNode);
  const wrap = mdEl("div", "code-wrap");
  const bar = mdEl("div", "code-bar");
  bar.append(mdEl("span", "code-lang", lang || "code"));
  const copy = mdEl("button", "copy", "Copy");
  copy.type = "button";
  copy.setAttribute("aria-label", "Copy the code");
  copy.addEventListener("click", () => {
    navigator.clipboard?.writeText(code).then(() => { copy.textContent = "Copied"; }, () => { copy.textContent = "Copy failed"; });
  });
  bar.append(copy);
  wrap.append(bar, pre);
  return wrap;
}

function mdCells(line) {
  let row = line.trim();
  if (row.startsWith("|")) row = row.slice(1);
  if (row.endsWith("|") && !row.endsWith("\\|")) row = row.slice(0, -1);
  return row.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, "|"));
}

const MD_LIST = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const MD_TABLE_RULE = /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/;

// Markdown text -> a DocumentFragment.
function renderMarkdown(text) {
  const out = document.createDocumentFragment();
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  let para = [];
  const flush = () => {
    if (!para.length) return;
    const p = mdEl("p");
    para.forEach((line, n) => {
      if (n) p.append(mdEl("br"));
      mdInline(line, p);
    });
    out.append(p);
    para = [];
  };
  while (i < lines.length) {
    const line = lines[i];
    const fence = /^\s*(```+|~~~+)\s*([\w+#.-]*)\s*$/.exec(line);
    if (fence) {
      flush();
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i += 1; // the closing fence (or the end of a text still streaming)
      out.append(mdCode(body.join("\n"), fence[2].toLowerCase()));
      continue;
    }
    const heading = /^(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      flush();
      const h = mdEl(`h${Math.min(6, heading[1].length + 2)}`, "md-h");
      mdInline(heading[2], h);
      out.append(h);
      i += 1;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) { flush(); out.append(mdEl("hr")); i += 1; continue; }
    if (/^\s*>/.test(line)) {
      flush();
      const quoted = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) quoted.push(lines[i++].replace(/^\s*>\s?/, ""));
      const q = mdEl("blockquote");
      q.append(renderMarkdown(quoted.join("\n")));
      out.append(q);
      continue;
    }
    if (line.includes("|") && i + 1 < lines.length && MD_TABLE_RULE.test(lines[i + 1])) {
      flush();
      const table = mdEl("table");
      const head = table.appendChild(mdEl("thead")).appendChild(mdEl("tr"));
      mdCells(line).forEach((c) => mdInline(c, head.appendChild(mdEl("th"))));
      const body = table.appendChild(mdEl("tbody"));
      i += 2;
      while (i < lines.length && lines[i].includes("|") && lines[i].trim()) {
        const tr = body.appendChild(mdEl("tr"));
        mdCells(lines[i++]).forEach((c) => mdInline(c, tr.appendChild(mdEl("td"))));
      }
      const scroll = mdEl("div", "table-wrap");
      scroll.append(table);
      out.append(scroll);
      continue;
    }
    const item = MD_LIST.exec(line);
    if (item) {
      flush();
      const ordered = /\d/.test(item[2]);
      const list = mdEl(ordered ? "ol" : "ul");
      if (ordered && parseInt(item[2], 10) !== 1) list.start = parseInt(item[2], 10);
      const indent = item[1].length;
      while (i < lines.length) {
        const m = MD_LIST.exec(lines[i]);
        if (!m || m[1].length !== indent) break;
        const li = list.appendChild(mdEl("li"));
        const inner = [m[3]];
        i += 1;
        while (i < lines.length && lines[i].trim() && !(MD_LIST.exec(lines[i]) && MD_LIST.exec(lines[i])[1].length === indent)
          && (/^\s/.test(lines[i]) || !MD_LIST.test(lines[i]))) {
          if (!/^\s/.test(lines[i]) && /^(#|>|```)/.test(lines[i])) break;
          inner.push(lines[i++].replace(/^\s{1,4}/, ""));
        }
        const rendered = renderMarkdown(inner.join("\n"));
        if (rendered.childNodes.length === 1 && rendered.firstChild.nodeName === "P") li.append(...rendered.firstChild.childNodes);
        else li.append(rendered);
      }
      out.append(list);
      continue;
    }
    if (!line.trim()) { flush(); i += 1; continue; }
    para.push(line);
    i += 1;
  }
  flush();
  return out;
}
