/* The arm64 native libraries of the models layer, loaded and used under qemu-aarch64
 * (scripts/ci/arm64_libs_check.sh). No Rust toolchain for aarch64 can be had here, so this
 * C harness is what runs them; it uses only each library's stable entry points, looked up
 * by name.
 *
 *   arm64_libs_check pdfium LIBDIR PDF MARKER...   PDFium loads and reads every MARKER in PDF
 *   arm64_libs_check ort LIBDIR VERSION            ONNX Runtime loads, is VERSION, has C API 17
 * prints one line and exits non-zero on a failure. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const void *(*GetApi)(uint32_t version);
  const char *(*GetVersionString)(void);
} OrtApiBase;

static void *open_lib(const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) { fprintf(stderr, "FAIL %s does not load: %s\n", path, dlerror()); exit(1); }
  return h;
}

static void *sym(void *h, const char *name) {
  void *f = dlsym(h, name);
  if (!f) { fprintf(stderr, "FAIL no symbol %s\n", name); exit(1); }
  return f;
}

static int check_ort(const char *dir, const char *want);
static int check_pdfium(const char *dir, const char *pdf_path, int markers, char **marker);

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  if (argc >= 4 && strcmp(argv[1], "ort") == 0) return check_ort(argv[2], argv[3]);
  if (argc < 5 || strcmp(argv[1], "pdfium") != 0) {
    fprintf(stderr, "usage: %s pdfium LIBDIR PDF MARKER... | ort LIBDIR VERSION\n", argv[0]);
    return 2;
  }
  return check_pdfium(argv[2], argv[3], argc - 4, argv + 4);
}

/* ONNX Runtime: its version, and the C API of the level the ort crate asks for (17). */
static int check_ort(const char *dir, const char *want) {
  void *ort = open_lib(dir, "libonnxruntime.so");
  const OrtApiBase *(*base)(void) = (const OrtApiBase *(*)(void))sym(ort, "OrtGetApiBase");
  const char *version = base()->GetVersionString();
  if (strcmp(version, want) != 0) { fprintf(stderr, "FAIL ONNX Runtime %s, expected %s\n", version, want); return 1; }
  if (!base()->GetApi(17)) { fprintf(stderr, "FAIL ONNX Runtime %s has no C API level 17\n", version); return 1; }
  printf("ok ONNX Runtime %s loads on arm64 (C API level 17)\n", version);
  return 0;
}

/* PDFium: open the PDF from memory, read each page's text, find every marker. */
static int check_pdfium(const char *dir, const char *pdf_path, int markers, char **marker) {
  void *pdfium = open_lib(dir, "libpdfium.so");
  void (*init)(void) = (void (*)(void))sym(pdfium, "FPDF_InitLibrary");
  void *(*load)(const void *, int, const char *) = (void *(*)(const void *, int, const char *))sym(pdfium, "FPDF_LoadMemDocument");
  int (*page_count)(void *) = (int (*)(void *))sym(pdfium, "FPDF_GetPageCount");
  void *(*load_page)(void *, int) = (void *(*)(void *, int))sym(pdfium, "FPDF_LoadPage");
  void *(*text_page)(void *) = (void *(*)(void *))sym(pdfium, "FPDFText_LoadPage");
  int (*count_chars)(void *) = (int (*)(void *))sym(pdfium, "FPDFText_CountChars");
  int (*get_text)(void *, int, int, unsigned short *) = (int (*)(void *, int, int, unsigned short *))sym(pdfium, "FPDFText_GetText");
  init();
  FILE *f = fopen(pdf_path, "rb");
  if (!f) { perror(pdf_path); return 1; }
  static char bytes[1 << 22];
  size_t n = fread(bytes, 1, sizeof bytes, f);
  fclose(f);
  void *doc = load(bytes, (int)n, NULL);
  if (!doc) { fprintf(stderr, "FAIL PDFium cannot open %s\n", pdf_path); return 1; }
  int pages = page_count(doc);
  static char text[1 << 20];
  size_t used = 0;
  for (int i = 0; i < pages; i++) {
    void *tp = text_page(load_page(doc, i));
    int chars = count_chars(tp);
    unsigned short *utf16 = calloc((size_t)chars + 1, sizeof *utf16);
    get_text(tp, 0, chars, utf16);
    for (int c = 0; c < chars && used + 1 < sizeof text; c++) text[used++] = utf16[c] < 128 ? (char)utf16[c] : '?';
    free(utf16);
  }
  text[used] = 0;
  for (int m = 0; m < markers; m++) {
    if (!strstr(text, marker[m])) { fprintf(stderr, "FAIL PDFium read no %s in %s\n", marker[m], pdf_path); return 1; }
  }
  printf("ok PDFium reads %d pages of %s on arm64 (%zu characters, every marker found)\n", pages, pdf_path, used);
  return 0;
}
