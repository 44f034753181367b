"""The text of a document a request brings or a vector store holds: a PDF's pages read with pypdf (or,
where pypdf refuses the file, with PDFium, Chromium's reader, which rebuilds a missing or broken
cross-reference table as browsers do), a text file decoded; anything else is refused by name. Bounded in
pages and characters, checked as pages are read. This module is what a worker process of the service's
`DocumentReader` imports: it imports no more than the readers."""

from __future__ import annotations

import faulthandler
import io
import resource
from dataclasses import dataclass

_TEXT_ENDINGS = (
    ".txt", ".md", ".csv", ".tsv", ".json", ".jsonl", ".xml", ".yaml", ".yml", ".html", ".htm", ".py",
    ".js", ".ts", ".java", ".c", ".h", ".cpp", ".go", ".rs", ".rb", ".sh", ".sql", ".toml", ".ini", ".log",
    ".rst", ".tex", ".css", ".php", ".cs", ".kt", ".swift",
)  # fmt: skip


class UnreadableError(ValueError):
    """A document whose text cannot be had; `unsupported` when it is of a kind not read at all (rather
    than broken or over a bound)."""

    def __init__(self, message: str, unsupported: bool = False) -> None:
        super().__init__(message)
        self.unsupported = unsupported

    def __reduce__(self) -> tuple[type[UnreadableError], tuple[str, bool]]:
        return UnreadableError, (str(self), self.unsupported)  # raised in a worker, read here


@dataclass(frozen=True)
class Bounds:
    """What reading one document may take."""

    pages: int = 2000
    chars: int = 5_000_000
    seconds: float = 30.0
    memory_mb: int = 1024


class _Text:
    """Text gathered page by page, refused as soon as it passes its bound."""

    def __init__(self, bounds: Bounds) -> None:
        self.bounds, self.parts, self.size = bounds, list[str](), 0

    def pages(self, count: int) -> None:
        if count > self.bounds.pages:
            raise UnreadableError(f"a PDF of {count} pages, over the limit of {self.bounds.pages}")

    def add(self, text: str) -> None:
        self.size += len(text)
        if self.size > self.bounds.chars:
            raise UnreadableError(f"a document of over {self.bounds.chars} characters of text")
        self.parts.append(text.strip())

    def joined(self) -> str:
        text = "\n\n".join(self.parts).strip()
        if not text:
            raise UnreadableError("a PDF with no text in it (pages that are images are not read here)")
        return text


def load() -> None:
    """Import the readers (pypdf and PDFium are an eighth of the server's own import, so they come with the
    first document, not with the server); done before the workers are forked, they inherit them."""
    import pypdf  # noqa: F401
    import pypdfium2  # noqa: F401


def _pdfium_text(data: bytes, bounds: Bounds) -> str:
    """A PDF's text as PDFium reads it; `UnreadableError` where it cannot either."""
    import pypdfium2

    try:
        document = pypdfium2.PdfDocument(data)
    except pypdfium2.PdfiumError:
        raise UnreadableError("a PDF that cannot be read") from None
    try:
        text = _Text(bounds)
        text.pages(len(document))
        for page in document:
            text.add(page.get_textpage().get_text_range())
        return text.joined()
    finally:
        document.close()


def document_text(name: str, data: bytes, bounds: Bounds = Bounds()) -> str:
    """A PDF's text, page by page; a text file's text; else `UnreadableError` saying why. Bounded in pages
    and characters (not in time: `DocumentReader` bounds that)."""
    if not data:
        raise UnreadableError("an empty file")
    if data.startswith(b"%PDF-"):
        from pypdf import PdfReader

        try:
            pages = PdfReader(io.BytesIO(data)).pages
            text = _Text(bounds)
            text.pages(len(pages))
            for page in pages:
                text.add(page.extract_text() or "")
            return text.joined()
        except UnreadableError:
            raise
        except Exception:  # any of pypdf's refusals (errors, limits, recursion): the tolerant reader next
            return _pdfium_text(data, bounds)
    if name.lower().endswith(_TEXT_ENDINGS) or b"\x00" not in data[:4096]:
        try:
            decoded = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            pass
        else:
            text = _Text(bounds)
            text.add(decoded)
            return decoded
    raise UnreadableError("neither a PDF nor UTF-8 text", unsupported=True)


def read(name: str, data: bytes, bounds: Bounds) -> str:
    """In a worker: the document's text; any failure of a reader is the document's."""
    try:
        return document_text(name, data, bounds)
    except UnreadableError:
        raise
    except MemoryError:
        raise UnreadableError(f"a document that needs over {bounds.memory_mb} MiB to read") from None
    except Exception as error:  # PDFium's and pypdf's own refusals, on a file built to break them
        raise UnreadableError(f"a document that cannot be read ({type(error).__name__})") from None


def bounded(memory_mb: int) -> None:
    """A worker's start: its address space bounded to what it has (forked from the server, it maps what
    the server maps) and `memory_mb` more, so a decompression bomb fails it rather than the host. A reader
    that aborts on it is an expected end (its read is refused): no crash report is written for it."""
    faulthandler.disable()
    try:
        with open("/proc/self/status") as status:
            mapped = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
    except (OSError, StopIteration):
        return  # not Linux: the seconds still bound a read
    limit = mapped + memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))
