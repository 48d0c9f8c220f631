// Output layout `OutputLayout::Interleaved` (CPU twin: `gpu::cpu_twin::InterleavedWords`):
// the layout of the CPU decoder (HWC; 8-bit samples four to a u32 word, 16-bit samples two
// to a word, little-endian), written a patch row at a time: a word the row covers entirely
// is stored, a word shared with the patch beside it (at most two per row) ORed into the
// buffer the host clears before the batch's first chunk (so the bytes of a shared word
// combine, and the padding between images is 0). The version-1 body packs its rows itself
// (`OUTPUT_PACKED`, `put_word`); the version-2 body hands over samples (`row_sample`) and
// then the finished row (`end_row`). No atomic per sample in global memory. Assembled after
// the shared decode bodies and before decode.wgsl.

@group(0) @binding(4) var<storage, read_write> out_words: array<atomic<u32>>;

// The version-1 body writes rows of whole words through `put_word`.
const OUTPUT_PACKED: bool = true;

// Output word `w` of `img` (from its out_base): `value` is the word when `whole`, else the
// part of it one patch row holds.
fn put_word(img: ImageInfo, w: u32, value: u32, whole: bool) {
    if (whole) {
        atomicStore(&out_words[img.out_base + w], value);
    } else {
        atomicOr(&out_words[img.out_base + w], value);
    }
}

// Output words of one version-2 patch row while its samples arrive: word j holds the row's
// samples in output word first / per_word + j, where `first` is the row's first sample
// (zero at the workgroup's start, as all workgroup memory; `end_row` clears what it reads).
const OUT_ROW_WORDS: u32 = MAX_PATCH * MAX_CHANNELS / 2u + 1u;
var<workgroup> out_row: array<atomic<u32>, OUT_ROW_WORDS>;

// The version-1 body packs its rows (`OUTPUT_PACKED`): never called.
fn put_sample(img: ImageInfo, ch: u32, y: u32, x: u32, stored: u32) {}

// The version-2 body's samples: ORed into the row's words in workgroup memory (the patch's
// first column is x rounded down to the patch size).
fn row_sample(img: ImageInfo, ch: u32, y: u32, x: u32, stored: u32) {
    let v = dequantize(img, stored);
    let shift = word_shift(img);
    let first = row_span(img, y, x & ~((1u << img.patch_log2) - 1u), 0u).x;
    let s = (y * img.width + x) * img.channels + ch;
    let i = s & ((1u << shift) - 1u);
    atomicOr(&out_row[(s >> shift) - (first >> shift)], v << (img.depth * i));
}

// After a version-2 patch row's barrier (uniform control flow), pixel row `y`, columns
// x0 .. x0 + pw: its words go out through `put_word`, invocation `lid` taking every WG-th,
// and the row's words in workgroup memory are cleared for the next row.
fn end_row(img: ImageInfo, y: u32, x0: u32, pw: u32, lid: u32) {
    let shift = word_shift(img);
    let span = row_span(img, y, x0, pw);
    let w0 = span.x >> shift;
    let w_end = (span.y + (1u << shift) - 1u) >> shift;
    for (var w = w0 + lid; w < w_end; w = w + WG) {
        let value = atomicExchange(&out_row[w - w0], 0u);
        put_word(img, w, value, word_whole(w, shift, span));
    }
}
