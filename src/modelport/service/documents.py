"""The text of a document a request brings or a vector store holds: a PDF's pages read with pypdf (or,
where pypdf refuses the file, with PDFium, Chromium's reader, which rebuilds a missing or broken
cross-reference table as browsers do), a text file decoded; anything else is refused by name."""

from __future__ import annotations

import io

import pypdfium2
from pypdf import PdfReader

_TEXT_ENDINGS = (
    ".txt", ".md", ".csv", ".tsv", ".json", ".jsonl", ".xml", ".yaml", ".yml", ".html", ".htm", ".py",
    ".js", ".ts", ".java", ".c", ".h", ".cpp", ".go", ".rs", ".rb", ".sh", ".sql", ".toml", ".ini", ".log",
    ".rst", ".tex", ".css", ".php", ".cs", ".kt", ".swift",
)  # fmt: skip


class UnreadableError(ValueError):
    """A document whose text cannot be had; `unsupported` when it is of a kind not read at all (rather
    than broken)."""

    def __init__(self, message: str, unsupported: bool) -> None:
        super().__init__(message)
        self.unsupported = unsupported


def _pdfium_text(data: bytes) -> str:
    """A PDF's text as PDFium reads it; `UnreadableError` where it cannot either."""
    try:
        document = pypdfium2.PdfDocument(data)
    except pypdfium2.PdfiumError:
        raise UnreadableError("a PDF that cannot be read", unsupported=False) from None
    try:
        return "\n\n".join(page.get_textpage().get_text_range().strip() for page in document).strip()
    finally:
        document.close()


def document_text(name: str, data: bytes) -> str:
    """A PDF's text, page by page; a text file's text; else `UnreadableError` saying why."""
    if data.startswith(b"%PDF-"):
        try:
            pages = PdfReader(io.BytesIO(data)).pages
            return "\n\n".join((page.extract_text() or "").strip() for page in pages).strip()
        except Exception:  # any of pypdf's refusals (errors, limits, recursion): the tolerant reader next
            return _pdfium_text(data)
    if name.lower().endswith(_TEXT_ENDINGS) or b"\x00" not in data[:4096]:
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError:
            pass
    raise UnreadableError("neither a PDF nor UTF-8 text", unsupported=True)
