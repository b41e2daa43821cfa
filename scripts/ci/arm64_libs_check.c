/* The arm64 native libraries of the models layer, loaded and used under qemu-aarch64
 * (scripts/ci/arm64_libs_check.sh). No Rust toolchain for aarch64 can be had here, so this
 * C harness is what runs them; it uses only each library's stable entry points, looked up
 * by name.
 *
 *   arm64_libs_check pdfium LIBDIR PDF MARKER...   PDFium loads and reads every MARKER in PDF
 *   arm64_libs_check ort LIBDIR VERSION            ONNX Runtime loads, is VERSION, has C API 17
 *   arm64_libs_check encode LIBDIR MODEL OUTPUT IDS...
 *                                                  runs the ONNX graph MODEL on each input
 *                                                  (IDS: its token ids joined by commas; mask
 *                                                  all ones, token types 0) in one session set
 *                                                  up as Sextant's ONNX Runtime backend sets
 *                                                  its own (all graph optimisations, 2 intra-op
 *                                                  threads) and prints OUTPUT's values, a line
 *                                                  an input
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
static int run_encode(const char *dir, const char *model, const char *output, int n, char **ids);
static int check_pdfium(const char *dir, const char *pdf_path, int markers, char **marker);

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  if (argc >= 4 && strcmp(argv[1], "ort") == 0) return check_ort(argv[2], argv[3]);
  if (argc >= 6 && strcmp(argv[1], "encode") == 0) return run_encode(argv[2], argv[3], argv[4], argc - 5, argv + 5);
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

/* Slots of the OrtApi function table (C API level 17) that run_encode calls. The table
 * is append-only across releases (a slot never moves), so these are the positions the
 * ort crate's bindings give (ort-sys 2.0.0-rc.15, `OrtApi`, counted without the wasm-only
 * variants). A wrong slot is caught at once: CreateStatus and GetErrorMessage are checked
 * against each other before anything runs, and any other call with a wrong slot fails. */
enum {
  CREATE_STATUS = 0, GET_ERROR_MESSAGE = 2, CREATE_ENV = 3, CREATE_SESSION = 7, RUN = 9,
  CREATE_SESSION_OPTIONS = 10, SET_GRAPH_OPTIMIZATION_LEVEL = 23, SET_INTRA_OP_THREADS = 24,
  CREATE_TENSOR_WITH_DATA = 49, GET_TENSOR_MUTABLE_DATA = 51, GET_TENSOR_ELEMENT_COUNT = 64,
  GET_TENSOR_TYPE_AND_SHAPE = 65, CREATE_CPU_MEMORY_INFO = 69,
};
typedef void *Status; /* OrtStatus*: NULL on success */
static const void *const *api;
#define CALL(type, index, ...) (((type)api[index])(__VA_ARGS__))

static void ok(Status st, const char *what) {
  if (!st) return;
  const char *msg = CALL(const char *(*)(const void *), GET_ERROR_MESSAGE, st);
  fprintf(stderr, "FAIL %s: %s\n", what, msg);
  exit(1);
}

static void run_one(void *session, void *memory, const char *output, const char *ids);

/* ONNX Runtime: MODEL run on each input, OUTPUT's values printed a line an input. */
static int run_encode(const char *dir, const char *model, const char *output, int inputs, char **ids) {
  void *ort = open_lib(dir, "libonnxruntime.so");
  const OrtApiBase *(*base)(void) = (const OrtApiBase *(*)(void))sym(ort, "OrtGetApiBase");
  api = (const void *const *)base()->GetApi(17);
  if (!api) { fprintf(stderr, "FAIL no C API level 17\n"); return 1; }
  Status probe = CALL(Status (*)(int, const char *), CREATE_STATUS, 1, "slot check");
  if (!probe || strcmp(CALL(const char *(*)(const void *), GET_ERROR_MESSAGE, probe), "slot check") != 0) {
    fprintf(stderr, "FAIL the OrtApi slots are not the ones this harness was written for\n");
    return 1;
  }
  void *env, *options, *session, *memory;
  ok(CALL(Status (*)(int, const char *, void **), CREATE_ENV, 2, "arm64-check", &env), "CreateEnv");
  ok(CALL(Status (*)(void **), CREATE_SESSION_OPTIONS, &options), "CreateSessionOptions");
  ok(CALL(Status (*)(void *, int), SET_GRAPH_OPTIMIZATION_LEVEL, options, 99), "SetSessionGraphOptimizationLevel");
  ok(CALL(Status (*)(void *, int), SET_INTRA_OP_THREADS, options, 2), "SetIntraOpNumThreads");
  ok(CALL(Status (*)(const void *, const char *, const void *, void **), CREATE_SESSION, env, model, options, &session),
     "CreateSession");
  ok(CALL(Status (*)(int, int, void **), CREATE_CPU_MEMORY_INFO, 1, 0, &memory), "CreateCpuMemoryInfo");
  for (int i = 0; i < inputs; i++) run_one(session, memory, output, ids[i]);
  return 0;
}

/* One run on the comma-separated token ids `ids`, OUTPUT's values printed on one line. */
static void run_one(void *session, void *memory, const char *output, const char *ids) {
  int n = 1;
  for (const char *c = ids; *c; c++) n += *c == ',';
  int64_t *tokens = calloc((size_t)n, sizeof *tokens), *mask = calloc((size_t)n, sizeof *mask),
          *types = calloc((size_t)n, sizeof *types);
  char *end = (char *)ids;
  for (int i = 0; i < n; i++) { tokens[i] = strtoll(end, &end, 10); mask[i] = 1; if (*end == ',') end++; }
  int64_t shape[2] = {1, n};
  int64_t *data[3] = {tokens, mask, types};
  void *inputs[3];
  for (int i = 0; i < 3; i++) {
    ok(CALL(Status (*)(const void *, void *, size_t, const int64_t *, size_t, int, void **), CREATE_TENSOR_WITH_DATA,
            memory, data[i], (size_t)n * sizeof(int64_t), shape, 2, 7 /* int64 */, &inputs[i]),
       "CreateTensorWithDataAsOrtValue");
  }
  const char *input_names[3] = {"input_ids", "attention_mask", "token_type_ids"};
  const char *output_names[1] = {output};
  void *result = NULL;
  ok(CALL(Status (*)(void *, const void *, const char *const *, const void *const *, size_t, const char *const *, size_t,
                     void **),
          RUN, session, NULL, input_names, (const void *const *)inputs, 3, output_names, 1, &result),
     "Run");
  void *info;
  size_t count;
  float *values;
  ok(CALL(Status (*)(const void *, void **), GET_TENSOR_TYPE_AND_SHAPE, result, &info), "GetTensorTypeAndShape");
  ok(CALL(Status (*)(const void *, size_t *), GET_TENSOR_ELEMENT_COUNT, info, &count), "GetTensorShapeElementCount");
  ok(CALL(Status (*)(void *, void **), GET_TENSOR_MUTABLE_DATA, result, (void **)&values), "GetTensorMutableData");
  for (size_t i = 0; i < count; i++) printf(i ? " %.9g" : "%.9g", values[i]);
  printf("\n");
  free(tokens);
  free(mask);
  free(types);
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
