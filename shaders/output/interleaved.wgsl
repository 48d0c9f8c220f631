// Output layout `OutputLayout::Interleaved` (CPU twin: `gpu::cpu_twin::InterleavedWords`):
// the layout of the CPU decoder (HWC; 8-bit samples four to a u32 word, 16-bit samples two
// to a word, little-endian). The version-1 body packs whole rows (`OUTPUT_PACKED`): a word
// its row covers entirely is stored, a word shared with the patch beside it (at most two per
// row) ORed in. The version-2 body ORs each sample into its word (`put_sample`). Both OR
// into a buffer the host clears before the batch's first chunk, so the bytes of a shared
// word combine (and the padding between images is 0). Assembled after the shared decode
// bodies and before decode.wgsl.

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

fn put_sample(img: ImageInfo, ch: u32, y: u32, x: u32, stored: u32) {
    let v = dequantize(img, stored);
    let s = (y * img.width + x) * img.channels + ch;
    if (img.depth == 8u) {
        // Byte s of the image: word s / 4, byte s % 4.
        atomicOr(&out_words[img.out_base + s / 4u], v << (8u * (s % 4u)));
    } else {
        // Bytes 2s, 2s + 1 of the image: word s / 2, half s % 2.
        atomicOr(&out_words[img.out_base + s / 2u], v << (16u * (s % 2u)));
    }
}
