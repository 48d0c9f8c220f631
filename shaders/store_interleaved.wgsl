// Packs the intermediate samples into the interleaved (HWC) output, the layout of the CPU
// decoder: 8-bit samples four to a u32 word, 16-bit samples two to a word (little-endian).
// One invocation per output word, so no two invocations write the same word.
// CPU twin: `gpu::cpu_twin::store_interleaved`.

@group(0) @binding(0) var<storage, read> samples: array<u32>;
@group(0) @binding(1) var<storage, read> images: array<ImageInfo>;
@group(0) @binding(2) var<storage, read_write> out_words: array<u32>;
@group(0) @binding(3) var<uniform> params: Params;

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let w = (wid.y * nwg.x + wid.x) * 256u + lid;
    if (w >= params.count) {
        return;
    }
    let img = images[find_image_by_word(w)];
    if (w < img.out_base) {
        // Before the chunk's first band: the previous chunk's output.
        return;
    }
    let local = w - img.out_base;
    let n = img.width * img.height * img.channels;
    var word = 0u;
    if (img.depth == 8u) {
        for (var k = 0u; k < 4u; k = k + 1u) {
            let s = local * 4u + k;
            if (local < img.out_words && s < n) {
                word = word | ((samples[img.sample_base + s] & 0xffu) << (8u * k));
            }
        }
    } else {
        for (var k = 0u; k < 2u; k = k + 1u) {
            let s = local * 2u + k;
            if (local < img.out_words && s < n) {
                word = word | ((samples[img.sample_base + s] & 0xffffu) << (16u * k));
            }
        }
    }
    out_words[w] = word;
}
