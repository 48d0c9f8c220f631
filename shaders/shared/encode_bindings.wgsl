// The bindings of the error-bounded encoder's kernels (encode_quantise.wgsl,
// encode_differences.wgsl, encode_histogram.wgsl, encode_pack.wgsl): one bind group layout
// for all of them (gpu/encoder.rs), so every stage declares them alike. `EncodeParams` and
// `EncodeSegment` are generated from src/gpu/encode_abi.rs.

// The input values as f32 bits (read as u32: no arithmetic meets a subnormal).
@group(0) @binding(0) var<storage, read> values: array<u32>;
// The bins (NO_BIN for an exception until the fill).
@group(0) @binding(1) var<storage, read_write> q: array<u32>;
// The zigzag residuals, C order (the stream).
@group(0) @binding(2) var<storage, read_write> z: array<u32>;
// `histogram`: per segment and token set, HIST_WORDS words (a count per token, then the raw
// bits). `pack`: the segments' bits, each from its `out_word`. (One binding for both keeps
// the stages within 8 storage bindings.)
@group(0) @binding(3) var<storage, read_write> results: array<u32>;
@group(0) @binding(4) var<storage, read> segs: array<EncodeSegment>;
// Per chunk, BOUNDED_ALPHABET entries: code in bits 0..16, length from bit 16.
@group(0) @binding(5) var<storage, read> codes: array<u32>;
// Order keys of the smallest and largest regular value (atomicMin / atomicMax).
@group(0) @binding(6) var<storage, read_write> extent: array<atomic<u32>>;
// The exception fill: per block FILL_WORDS words (last regular bin, first regular bin,
// carried bin), then the first regular bin of the array; from `params.flags_at`, one bit
// per value, set for an exception (bit i % 32 of word i / 32).
@group(0) @binding(7) var<storage, read_write> fill: array<u32>;
@group(0) @binding(8) var<uniform> params: EncodeParams;

// The item of an invocation of a dispatch of (x, y) workgroups (items in x-fastest order;
// gpu/encoder.rs dispatches `groups` of them): one item per invocation, so no loop over
// items meets llvmpipe's 65535 iterations.
fn item(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.y * nwg.x * ENCODE_WG + gid.x;
}
