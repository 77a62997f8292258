"""Record the history `test_temporal_determinism.py` replays (run from a checkout).

python tests/temporal/record_history.py ADDRESS   # a dev server, e.g. 127.0.0.1:7233
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from test_temporal_determinism import HISTORY, record


async def main(address: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        history = await record(address, Path(tmp) / "runs.db")
    HISTORY.write_text(history.to_json(), encoding="utf-8")
    print(f"{HISTORY}: {len(history.events)} events")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
