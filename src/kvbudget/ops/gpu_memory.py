"""Each GPU's framebuffer as the driver reports it, from the DCGM exporter's ``/metrics`` page or from
``nvidia-smi --query-gpu=index,name,memory.used,memory.total[,memory.free] --format=csv[,noheader,nounits]``,
as one ``GpuMemory`` record per GPU (or per MIG instance), in bytes.

DCGM field identifiers (NVIDIA DCGM documentation, "Field Identifiers"; dcgm-exporter's default counters CSV):
``DCGM_FI_DEV_FB_USED``, ``DCGM_FI_DEV_FB_FREE``, ``DCGM_FI_DEV_FB_RESERVED`` and ``DCGM_FI_DEV_FB_TOTAL``, each in
MiB, labelled ``gpu``, ``UUID``, ``modelName``, ``Hostname`` (``hostname`` in newer exporters) and, on a MIG
instance, ``GPU_I_ID`` / ``GPU_I_PROFILE``. Without a total, the total is used + free + reserved (the driver keeps
the reserved part; dcgm-exporter issue #271: used + free alone is not constant)."""

from __future__ import annotations

import math

from .._record import record
from ..inputs import excerpt
from ..units import MiB
from .exposition import ScrapeError, read_source

MAX_SMI_BYTES = 1 << 20  # nvidia-smi's CSV: one short line per GPU


@record
class GpuMemory:
    """One GPU's framebuffer: ``used`` + ``free`` (+ ``reserved``, the driver's) = ``total``, in bytes."""

    gpu: str  # the index (``0``), or ``0/3`` for MIG instance 3 of GPU 0
    name: str  # the product name as reported ("NVIDIA H100 80GB HBM3")
    host: str
    used_bytes: int
    total_bytes: int
    free_bytes: int
    reserved_bytes: int = 0
    source: str = ""

    @property
    def used_fraction(self) -> float:
        return self.used_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def label(self) -> str:
        where = f" on {self.host}" if self.host else ""
        return f"GPU {self.gpu} ({self.name}{where})" if self.name else f"GPU {self.gpu}{where}"


_DCGM = {"DCGM_FI_DEV_FB_USED": "used", "DCGM_FI_DEV_FB_FREE": "free", "DCGM_FI_DEV_FB_RESERVED": "reserved",
         "DCGM_FI_DEV_FB_TOTAL": "total"}


def parse_dcgm(text: str, source: str) -> tuple[GpuMemory, ...]:
    """The GPUs on a DCGM exporter page. ScrapeError for text the parser refuses or a page with no
    DCGM_FI_DEV_FB_* series."""
    from prometheus_client.parser import text_string_to_metric_families

    gpus: dict[tuple[str, str, str], dict[str, object]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                field = _DCGM.get(sample.name)
                if field is None or not math.isfinite(sample.value) or sample.value < 0:
                    continue
                lab = sample.labels
                host = lab.get("Hostname", lab.get("hostname", ""))
                gpu = lab.get("gpu", "?") + (f"/{lab['GPU_I_ID']}" if lab.get("GPU_I_ID") else "")
                entry = gpus.setdefault((host, gpu, lab.get("UUID", "")), {"name": lab.get("modelName", "")})
                entry[field] = int(sample.value * MiB)
    except Exception as exc:  # the parser's ValueError and kin on malformed text
        line = str(exc).splitlines()[0][:80] if str(exc) else exc.__class__.__name__
        raise ScrapeError(f"{source}: not Prometheus text exposition ({line}); give the DCGM exporter's /metrics "
                          "(default port 9400)") from None
    out = []
    for (host, gpu, _uuid), e in sorted(gpus.items()):
        used, free, reserved = e.get("used"), e.get("free"), e.get("reserved", 0)
        if not isinstance(used, int) or not isinstance(reserved, int):
            continue
        total = e.get("total")
        if not isinstance(total, int):
            if not isinstance(free, int):
                continue
            total = used + free + reserved
        free_bytes = free if isinstance(free, int) else max(total - used - reserved, 0)
        out.append(GpuMemory(gpu, str(e["name"]), host, used, total, free_bytes, reserved, source))
    if not out:
        raise ScrapeError(f"{source}: no DCGM_FI_DEV_FB_USED with DCGM_FI_DEV_FB_FREE (or _TOTAL) on this page; is it "
                          "the DCGM exporter's /metrics?")
    return tuple(out)


_SMI_COLUMNS = ("index", "name", "memory.used", "memory.total", "memory.free")


def _mib(text: str, column: str, source: str, line: int) -> int:
    t = text.strip().removesuffix("MiB").strip()
    if not t.isdecimal() or len(t) > 12:
        raise ScrapeError(f"{source} line {line}: {column} is {text.strip()[:20]!r}, not a number of MiB (run nvidia-smi "
                          "--query-gpu=index,name,memory.used,memory.total --format=csv)")
    return int(t) * MiB


def parse_nvidia_smi(text: str, source: str) -> tuple[GpuMemory, ...]:
    """``nvidia-smi --query-gpu=index,name,memory.used,memory.total[,memory.free] --format=csv`` output, with or
    without its header line and units (``noheader``, ``nounits``)."""
    import csv

    rows = [r for r in csv.reader(text.splitlines()) if r and any(c.strip() for c in r)]
    if not rows:
        raise ScrapeError(f"{source}: empty; save the output of nvidia-smi --query-gpu=index,name,memory.used,"
                          "memory.total --format=csv")
    first = [c.strip().lower() for c in rows[0]]
    header = bool(first) and first[0].startswith("index")
    if header:
        columns = [c.split(" [")[0] for c in first]
        units = [c.partition(" [")[2].rstrip("]") for c in first if c.startswith("memory.")]
        if any(u and u != "mib" for u in units):  # nvidia-smi prints MiB: a column of GiB read as MiB is 1,024x off
            raise ScrapeError(f"{source}: the header gives memory in {next(u for u in units if u and u != 'mib')!r}, "
                              "not MiB as nvidia-smi prints it; save nvidia-smi's own output (--format=csv)")
        rows = rows[1:]
    else:
        columns = list(_SMI_COLUMNS[: len(rows[0])])
    missing = [c for c in ("index", "memory.used", "memory.total") if c not in columns]
    if missing:
        raise ScrapeError(f"{source}: no {missing[0]} column; query index,name,memory.used,memory.total")
    out: list[GpuMemory] = []
    for n, row in enumerate(rows, start=2 if header else 1):
        if len(row) != len(columns):
            raise ScrapeError(f"{source} line {n}: {len(row)} fields where the header has {len(columns)}")
        cell = dict(zip(columns, (c.strip() for c in row), strict=True))
        used = _mib(cell["memory.used"], "memory.used", source, n)
        total = _mib(cell["memory.total"], "memory.total", source, n)
        free = _mib(cell["memory.free"], "memory.free", source, n) if "memory.free" in cell else max(total - used, 0)
        if used > total:
            raise ScrapeError(f"{source} line {n}: memory.used is more than memory.total")
        if any(g.gpu == cell["index"][:12] for g in out):  # two queries in one file (a loop's output, tee -a)
            raise ScrapeError(f"{source} line {n}: GPU {excerpt(cell['index'], 12)} appears twice: the file holds more "
                              "than one query; save one run of nvidia-smi --query-gpu=...")
        out.append(GpuMemory(cell["index"][:12], cell.get("name", "")[:60], "", used, total, free, 0, source))
    if not out:
        raise ScrapeError(f"{source}: a header and no GPU; save the whole output of nvidia-smi --query-gpu=...")
    return tuple(out)


def read_dcgm(source: str) -> tuple[GpuMemory, ...]:
    return parse_dcgm(read_source(source, "--dcgm"), source)


def read_nvidia_smi(path: str) -> tuple[GpuMemory, ...]:
    from ..inputs import read_text

    return parse_nvidia_smi(read_text(path, "--nvidia-smi", MAX_SMI_BYTES, errors="replace"), path)
