"""Documents for tests: PDFs made without a PDF writer, readable ones and ones built to break readers."""

from __future__ import annotations

import functools


def pdf(text: str) -> bytes:
    """A one-page PDF showing `text`, written out by hand (offsets computed) so no PDF writer is needed."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    return _assembled(objects)


def _assembled(objects: list[bytes], trailer: bytes = b"") -> bytes:
    """A PDF of `objects` (numbered from 1, the first the catalog), with its cross-reference table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R %s>>\n" % (len(objects) + 1, trailer)
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def pdf_of_pages(count: int, text: str = "page") -> bytes:
    """A PDF of `count` pages, all showing `text` from one shared content stream."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    first_page = 5
    kids = b" ".join(b"%d 0 R" % (first_page + i) for i in range(count))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % count,
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R "
        b"/Resources << /Font << /F1 4 0 R >> >> >>"
    )
    return _assembled(objects + [page] * count)


HOSTILE_PDF_NAMES = (
    "nested 5,000 deep",
    "a flate bomb",
    "a /Length of 99999999999",
    "20,000 pages",
    "encrypted",
    "200 MB of text in 200 KB",
    "zero bytes",
    "a header only",
)


@functools.cache
def hostile_pdfs() -> dict[str, bytes]:
    """PDFs built to make a reader recurse, inflate, overread or give up, by what each does (named by
    `HOSTILE_PDF_NAMES`, which tests parametrize over: building them is 5 s of compressing, done once a
    process and only where a test reads them)."""
    import re
    import zlib

    one = pdf("hello")
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R >>"
    nested = b"[" * 5000 + b"]" * 5000
    deep = _assembled(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
            b"<< /Length %d >>\nstream\n" % len(nested) + nested + b"\nendstream",
            page.replace(b"/Contents 3 0 R", b"/Contents 3 0 R /Annots " + nested),
        ]
    )
    inflated = zlib.compress(b" " * (300 * 1024 * 1024), 9)
    bomb = _assembled(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
            b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(inflated) + inflated + b"\nendstream",
            page,
        ]
    )
    said = zlib.compress(b"BT /F1 12 Tf 72 720 Td (" + b"a" * (200 * 1024 * 1024) + b") Tj ET", 9)
    text_bomb = _assembled(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
            b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(said) + said + b"\nendstream",
            page.replace(b">>", b"/Resources << /Font << /F1 5 0 R >> >> >>", 1)[:-2],
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        ]
    )
    encrypted = _assembled(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
            b"<< /Length 5 >>\nstream\nxxxxx\nendstream",
            page,
            b"<< /Filter /Standard /V 2 /R 3 /Length 128 /P -4 /O <%s> /U <%s> >>" % (b"ab" * 32, b"cd" * 32),
        ],
        trailer=b"/Encrypt 5 0 R /ID [<%s> <%s>] " % (b"0123456789abcdef" * 2, b"0123456789abcdef" * 2),
    )
    built = (
        deep,
        bomb,
        re.sub(rb"/Length \d+", b"/Length 99999999999", one),
        pdf_of_pages(20_000),
        encrypted,
        text_bomb,
        b"",
        b"%PDF-1.7\n",
    )
    return dict(zip(HOSTILE_PDF_NAMES, built, strict=True))
