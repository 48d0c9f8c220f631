// Output layout `OutputLayout::Interleaved` (CPU twin: `gpu::cpu_twin::InterleavedWords`):
// each sample ORed straight into its output word, the layout of the CPU decoder (HWC; 8-bit
// samples four to a u32 word, 16-bit samples two to a word, little-endian). Streams of one
// image share output words, hence the atomics; the host clears the output buffer before the
// batch's first chunk, so the bytes of each word combine correctly (and the padding between
// images is 0). Assembled after the shared decode bodies and before decode.wgsl.

@group(0) @binding(4) var<storage, read_write> out_words: array<atomic<u32>>;

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
