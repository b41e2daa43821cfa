#!/usr/bin/env bash
# The PDFs the tests read (tests/data/pdf/), made with Debian's tools so that they are PDFs
# as real writers produce them:
#   report.pdf     3 pages of text (enscript + Ghostscript's ps2pdf), about 170 words each,
#                  its title in the document information; page n ends with "page-n-marker"
#   encrypted.pdf  report.pdf encrypted with a user password (qpdf, AES-256)
#   scanned.pdf    report.pdf's pages as images only, no text layer (Ghostscript pdfimage24)
#   damaged.pdf    a PDF header followed by bytes that are not PDF
#   truncated.pdf  report.pdf cut after its first 2,500 bytes
#
#   apt-get install enscript ghostscript qpdf && bash scripts/data/make_test_pdfs.sh
set -euo pipefail
out=$(cd "$(dirname "$0")/../.." && pwd)/tests/data/pdf
mkdir -p "$out"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
{
  printf 'Quarterly operating review\n\n'
  for q in 1 2 3 4 5 6 7 8 9 10 11 12; do
    printf 'Revenue in region %s rose on strong demand for wind turbines and service contracts.\n' "$q"
  done
  printf 'Gross margin widened to 41 percent on better pricing. page-1-marker\n\f'
  printf 'Liquidity and capital resources\n\n'
  for q in 1 2 3 4 5 6 7 8 9 10 11 12; do
    printf 'Cash held by subsidiary %s was swept daily into the central treasury account.\n' "$q"
  done
  printf 'The revolving credit facility of 2 billion dollars was undrawn. page-2-marker\n\f'
  printf 'Risk factors\n\n'
  for q in 1 2 3 4 5 6 7 8 9 10 11 12; do
    printf 'Supplier %s of rare earth magnets is concentrated in one region and may fail.\n' "$q"
  done
  printf 'A disruption could delay turbine deliveries by two quarters. page-3-marker\n'
} > "$tmp/report.txt"
# -B: no page headers (they would put the date in the text); -t: the document's title.
enscript -q -B -t "Quarterly operating review" -p "$tmp/report.ps" "$tmp/report.txt"
ps2pdf -dPDFSETTINGS=/default "$tmp/report.ps" "$out/report.pdf"
qpdf --encrypt secret-user secret-owner 256 -- "$out/report.pdf" "$out/encrypted.pdf"
gs -q -dNOPAUSE -dBATCH -sDEVICE=pdfimage24 -r72 -o "$out/scanned.pdf" "$out/report.pdf"
{ printf '%%PDF-1.7\n'; head -c 4000 /dev/zero | tr '\0' 'x'; printf '\n%%%%EOF\n'; } > "$out/damaged.pdf"
head -c 2500 "$out/report.pdf" > "$out/truncated.pdf"
ls -l "$out"
