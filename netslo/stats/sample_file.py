"""The raw-samples file: a compressed npz (zip of .npy) of compact chunks, written as they come.

Layout (format 2):
  meta.npy                      the run's metadata, JSON as uint8 (as in format 1)
  c<k>.<field>.offsets.npy      ``netslo.stats.compact.Column.offsets`` of chunk k, bytes split into
                                planes (all low bytes, then the next...) so zlib finds the zeros
  c<k>.<field>.presence.npy     packed presence bits, only when some but not all rows are known
  layout.npy                    JSON as uint8: format, version, rows, and per chunk its rows, start
                                and per field presence/ref/base/span/type/step/rank_start/lo/hi;
                                written last, once every chunk is on disk
Format 1 (``rows``: one structured ``SAMPLE_DTYPE`` array, plus ``meta``) is still read.

``ChunkWriter`` appends each chunk to the zip as soon as it is handed over, so a long run never
holds more than the chunk being written.
"""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np

from netslo.stats.compact import Chunk, Column, offset_type, with_added

FORMAT = "netslo-samples"
VERSION = 2
COMPRESSION = {"compression": zipfile.ZIP_DEFLATED, "compresslevel": 6}


def _json_array(obj) -> np.ndarray:
    return np.frombuffer(json.dumps(obj, sort_keys=True).encode(), dtype=np.uint8)


def _planes(a: np.ndarray) -> np.ndarray:
    """Bytes of a little-endian unsigned array regrouped by significance (a lossless shuffle)."""
    return np.ascontiguousarray(a.astype(a.dtype.newbyteorder("<")).view(np.uint8).reshape(-1, a.itemsize).T).ravel()


def _unplanes(b: np.ndarray, dtype) -> np.ndarray:
    dt = np.dtype(dtype).newbyteorder("<")
    return np.ascontiguousarray(b.reshape(dt.itemsize, -1).T).view(dt).ravel().astype(np.dtype(dtype))


class ChunkWriter:
    """Writes chunks to ``fileobj`` (a binary file or stream, seekable or not) as a format-2 npz."""

    def __init__(self, fileobj):
        self.zip = zipfile.ZipFile(fileobj, "w", **COMPRESSION)
        self.layout: list[dict] = []       # per chunk: rows, start, fields
        self.rows = 0

    def _array(self, name: str, a: np.ndarray) -> None:
        with self.zip.open(name + ".npy", "w", force_zip64=True) as f:
            np.lib.format.write_array(f, a, allow_pickle=False)

    def write(self, chunk: Chunk) -> None:
        """Append one chunk (its ``start`` must be the number of rows written so far)."""
        k = len(self.layout)
        fields = {}
        for name, c in chunk.columns.items():
            d = {"ref": c.ref, "base": c.base, "span": c.span, "step": c.step, "rank_start": c.rank_start,
                 "lo": c.lo, "hi": c.hi}
            if isinstance(c.presence, str):
                d["presence"] = c.presence
            else:
                d["presence"] = "bits"
                self._array(f"c{k}.{name}.presence", c.presence)
            if c.offsets is not None:
                d["type"] = c.offsets.dtype.str
                self._array(f"c{k}.{name}.offsets", _planes(c.offsets))
            fields[name] = d
        self.layout.append({"rows": chunk.rows, "start": chunk.start, "fields": fields})
        self.rows += chunk.rows

    def close(self, meta: dict) -> None:
        """Write the metadata and the layout; the file is complete (and readable) only after this."""
        self._array("meta", _json_array(meta))
        self._array("layout", _json_array({"format": FORMAT, "version": VERSION, "rows": self.rows,
                                           "chunks": self.layout}))
        self.zip.close()


def write(fileobj, chunks, meta: dict) -> None:
    """All ``chunks`` and ``meta`` as one format-2 npz."""
    w = ChunkWriter(fileobj)
    for c in chunks:
        w.write(c)
    w.close(meta)


def to_bytes(chunks, meta: dict) -> bytes:
    buf = io.BytesIO()
    write(buf, chunks, meta)
    return buf.getvalue()


def read(source) -> tuple[list[Chunk] | None, np.ndarray | None, dict]:
    """(chunks, None, meta) of a format-2 file, or (None, rows, meta) of a format-1 file.

    ``source``: a path or a binary file object."""
    with np.load(source, allow_pickle=False) as z:
        meta = json.loads(z["meta"].tobytes().decode())
        if "rows" in z.files:
            return None, z["rows"], meta
        layout = json.loads(z["layout"].tobytes().decode())
        if layout.get("format") != FORMAT or layout.get("version") != VERSION:
            raise ValueError(f"samples: layout {layout.get('format')!r} version {layout.get('version')!r} "
                             f"— expected {FORMAT!r} version {VERSION}")
        chunks = []
        for k, ch in enumerate(layout["chunks"]):
            cols = {}
            for name, d in ch["fields"].items():
                presence = z[f"c{k}.{name}.presence"] if d["presence"] == "bits" else d["presence"]
                offsets = None
                if d["span"]:
                    offsets = _unplanes(z[f"c{k}.{name}.offsets"], d["type"])
                    if offsets.dtype != offset_type(d["span"]):
                        raise ValueError(f"samples: chunk {k} {name}: offsets {offsets.dtype} for span {d['span']}")
                cols[name] = Column(presence=presence, ref=d["ref"], base=d["base"], span=d["span"],
                                    offsets=offsets, step=d["step"], rank_start=d["rank_start"],
                                    lo=d["lo"], hi=d["hi"])
            chunks.append(with_added(Chunk(ch["rows"], ch["start"], cols)))
    return chunks, None, meta
