//! The batch plan, on the CPU only (no wgpu: it builds and is tested without the `gpu`
//! feature): where each decoded image goes in the batch's output buffer, how images too large
//! for one binding are cut into bands of whole patch rows ([`Part`]s), how the parts are
//! grouped into chunks (one submission each) whose buffers fit the device's binding limit
//! ([`BatchPlan`]), and what each chunk uploads ([`ChunkInputs`], built by [`build_parts`]
//! for the GPU path and the CPU twins alike).

use std::ops::Range;

use super::abi::{scan_levels, workgroups_of, ImageInfo, Params, OUT_ALIGN, VERSION_COMPACT};
use crate::error::{LimitsError, Result};
use crate::format::{FileLayout, Header};
use crate::layout::{Normalize, OutputLayout, Window};

/// A batch's plan: each image's output position, the output buffer size, the parts (whole
/// images, or bands of patch rows of images too large for one chunk) and the chunks (runs of
/// parts whose buffers each fit the limit).
#[derive(Debug, Clone)]
pub(crate) struct BatchPlan {
    /// Byte position of each image in the batch's output buffer (multiples of 256).
    pub image_pos: Vec<u64>,
    /// Bytes of the output buffer (at least 256), alignment padding included.
    pub total_out: u64,
    /// Whole images, or bands of whole patch rows, in batch order.
    pub parts: Vec<Part>,
    /// Runs of `parts`, one submission each.
    pub chunks: Vec<Range<usize>>,
}

impl BatchPlan {
    /// The start of chunk `chunk`'s output binding: the 256-byte boundary at or before its
    /// first part's output.
    pub fn chunk_out_start(&self, chunk: &Range<usize>) -> u64 {
        self.parts[chunk.start].out_pos / OUT_ALIGN * OUT_ALIGN
    }
}

/// Plans a batch of validated files for `output`, each chunk's buffers at most `limit` bytes:
/// images split into bands of patch rows when one alone does not fit (interleaved output
/// only; [`LimitsError::GpuBuffer`] for f32 output, or when even one patch row does not fit).
/// `windows[i]`, where given, restricts image `i` to the patches that hold pixels of that
/// window (the rest of its output area stays zero); an image split into bands is decoded
/// whole. An empty `windows` decodes every image whole.
pub(crate) fn plan_batch(
    layouts: &[FileLayout],
    output: OutputLayout,
    limit: u64,
    windows: &[Option<Window>],
) -> Result<BatchPlan> {
    // Output positions: each image at a multiple of 256 bytes.
    let mut image_pos = Vec::with_capacity(layouts.len());
    let mut total_out = 0u64;
    for l in layouts {
        image_pos.push(total_out);
        total_out += output.output_bytes(&l.header).next_multiple_of(OUT_ALIGN);
    }
    let total_out = total_out.max(OUT_ALIGN);
    let f32_out = output.is_planar();
    // What a run of parts needs, each term checked against the binding limit (the decode
    // writes straight into the output binding: there is no intermediate buffer).
    #[derive(Clone, Copy, Default)]
    struct Sum {
        input: u64,
        streams: u64,
        out: u64,
        parts: u64,
    }
    let over = |s: &Sum| -> Option<(&'static str, u64)> {
        let checks = [
            ("stream-data buffer", s.input + 8),
            (
                "prefix-sum buffer",
                scan_levels(s.streams.min(u32::MAX as u64) as u32).1 * 4,
            ),
            ("output binding", s.out),
            (
                "image table",
                s.parts * std::mem::size_of::<ImageInfo>() as u64,
            ),
        ];
        if s.streams > u32::MAX as u64 / 2 {
            return Some(("prefix-sum buffer", s.streams * 4));
        }
        checks.into_iter().find(|&(_, n)| n > limit)
    };
    let part_sum = |l: &FileLayout, p: &Part| {
        let (input, streams) = p.input(l);
        Sum {
            input,
            streams,
            // A band's binding starts at the 256-byte boundary before it.
            out: p.out_end - p.out_pos + p.out_pos % OUT_ALIGN,
            parts: 1,
        }
    };
    // Split images that do not fit alone into bands of patch rows (interleaved only).
    let mut parts: Vec<Part> = Vec::new();
    for (i, l) in layouts.iter().enumerate() {
        let h = &l.header;
        let out = output.output_bytes(h);
        let whole = Part::whole(i, h, image_pos[i], out);
        let Some((what, needed)) = over(&part_sum(l, &whole)) else {
            let window = windows.get(i).cloned().flatten();
            parts.push(window.map_or(whole, |w| whole.restricted_to(h, &w)));
            continue;
        };
        if f32_out {
            return Err(LimitsError::GpuBuffer {
                what,
                needed,
                max: limit,
            }
            .into());
        }
        let row_bytes = h.width as u64 * h.channels() as u64 * h.bytes_per_sample() as u64;
        let band = |row0: u32, rows: u32| {
            let y0 = row0 * h.patch_size();
            let band_h = (rows * h.patch_size()).min(h.height - y0);
            let last = row0 + rows == h.patches_y();
            let out_pos = image_pos[i] + y0 as u64 * row_bytes;
            let out_len = band_h as u64 * row_bytes;
            Part {
                patch_row0: row0,
                patch_rows: rows,
                out_patch_row0: row0,
                out_height: band_h,
                out_pos,
                out_len,
                out_end: if last {
                    whole.out_end
                } else {
                    out_pos + out_len
                },
                ..whole
            }
        };
        let mut row0 = 0;
        while row0 < h.patches_y() {
            let mut rows = 1;
            if let Some((what, needed)) = over(&part_sum(l, &band(row0, 1))) {
                // Not even one patch row fits.
                return Err(LimitsError::GpuBuffer {
                    what,
                    needed,
                    max: limit,
                }
                .into());
            }
            while row0 + rows < h.patches_y() && over(&part_sum(l, &band(row0, rows + 1))).is_none()
            {
                rows += 1;
            }
            parts.push(band(row0, rows));
            row0 += rows;
        }
    }
    // Greedy chunking of the parts.
    let mut chunks: Vec<Range<usize>> = Vec::new();
    let (mut start, mut acc) = (0usize, Sum::default());
    for (k, p) in parts.iter().enumerate() {
        let s = part_sum(&layouts[p.image], p);
        let next = Sum {
            input: acc.input + s.input,
            streams: acc.streams + s.streams,
            out: acc.out + s.out,
            parts: acc.parts + 1,
        };
        if over(&next).is_some() && k > start {
            chunks.push(start..k);
            start = k;
            acc = s;
        } else {
            acc = next;
        }
    }
    if start < parts.len() {
        chunks.push(start..parts.len());
    }
    Ok(BatchPlan {
        image_pos,
        total_out,
        parts,
        chunks,
    })
}

/// Everything one chunk uploads: the shaders' inputs, exactly as the GPU path builds them
/// (the CPU twins and the tests use the same function).
#[derive(Debug, Clone)]
pub(crate) struct ChunkInputs {
    /// The stream bytes of every file, concatenated, as little-endian words (zero-padded,
    /// plus one spare word).
    pub input_words: Vec<u32>,
    /// Size of every stream (the files' size tables, concatenated).
    pub sizes: Vec<u32>,
    /// One entry per image (or band of an image): version-1 images first, then version-2
    /// ones, each in batch order (each entry point decodes a contiguous run of workgroups).
    pub images: Vec<ImageInfo>,
    /// Parameters of the decode dispatch of version-1 images (entry points `main`).
    pub decode_params: Params,
    /// Parameters of the decode dispatch of version-2 images (entry points `main_compact`).
    pub compact_params: Params,
    /// Words of the chunk's output binding (its parts' outputs, from the 256-byte boundary
    /// before the first, up to the end of the last, alignment padding included).
    pub out_words: u32,
}

/// What one image-table entry decodes: a band of whole patch rows of one image (the whole
/// image unless the image alone exceeds the device's buffer limits), or a window of its
/// patches (only the patches a crop needs), and where its output goes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Part {
    /// Index of the image in the batch.
    pub image: usize,
    /// The decoded patches: rows `patch_row0..patch_row0 + patch_rows`, columns
    /// `patch_col0..patch_col0 + patch_cols`.
    pub patch_row0: u32,
    pub patch_rows: u32,
    pub patch_col0: u32,
    pub patch_cols: u32,
    /// The patch row at which the part's output area begins (the band's first row, or 0 for a
    /// whole image or a window: a window decodes into its whole image's area), and the area's
    /// pixel rows.
    pub out_patch_row0: u32,
    pub out_height: u32,
    /// Byte position of the part's output area in the batch buffer.
    pub out_pos: u64,
    /// Bytes of the part's output area (interleaved: contiguous; a split image is never f32).
    pub out_len: u64,
    /// End of the part's output area in the batch buffer, including the image's alignment
    /// padding after its last band.
    pub out_end: u64,
}

impl Part {
    /// The whole image `image` with header `h`, its output at `out_pos` (`out_len` bytes).
    fn whole(image: usize, h: &Header, out_pos: u64, out_len: u64) -> Part {
        Part {
            image,
            patch_row0: 0,
            patch_rows: h.patches_y(),
            patch_col0: 0,
            patch_cols: h.patches_x(),
            out_patch_row0: 0,
            out_height: h.height,
            out_pos,
            out_len,
            out_end: out_pos + out_len.next_multiple_of(OUT_ALIGN),
        }
    }

    /// The part restricted to the patches holding pixels of `window` (clamped to the image; an
    /// empty window keeps one patch, so that every entry has a stream), its output area
    /// unchanged.
    fn restricted_to(self, h: &Header, window: &Window) -> Part {
        let ps = h.patch_size();
        let span = |r: &Range<u32>, size: u32, patches: u32| {
            let p0 = (r.start.min(size) / ps).min(patches - 1);
            let p1 = r.end.min(size).div_ceil(ps).clamp(p0 + 1, patches);
            (p0, p1 - p0)
        };
        let (patch_col0, patch_cols) = span(&window.columns, h.width, h.patches_x());
        let (patch_row0, patch_rows) = span(&window.rows, h.height, h.patches_y());
        Part {
            patch_row0,
            patch_rows,
            patch_col0,
            patch_cols,
            ..self
        }
    }

    /// The streams of the part, as runs `s0..s1` of the file's streams: one run when the part
    /// spans the image's width, else one per patch row.
    fn stream_runs(&self, h: &Header) -> impl Iterator<Item = (usize, usize)> {
        let spp = h.streams_per_patch() as usize;
        let per_row = h.patches_x() as usize * spp;
        let (c0, cols) = (
            self.patch_col0 as usize * spp,
            self.patch_cols as usize * spp,
        );
        let (r0, rows) = (self.patch_row0 as usize, self.patch_rows as usize);
        let full_width = cols == per_row;
        let runs = if full_width { 1 } else { rows };
        (0..runs).map(move |k| {
            if full_width {
                (r0 * per_row, (r0 + rows) * per_row)
            } else {
                let s0 = (r0 + k) * per_row + c0;
                (s0, s0 + cols)
            }
        })
    }

    /// Stream bytes and streams of the part.
    fn input(&self, l: &FileLayout) -> (u64, u64) {
        self.stream_runs(&l.header)
            .map(|(s0, s1)| (l.offsets[s1] - l.offsets[s0], (s1 - s0) as u64))
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    }
}

/// Builds a chunk's inputs from validated layouts, whole images, their outputs at
/// consecutive multiples of 256 bytes; `first_index` is the batch index of the first layout
/// (its error-flag slot). The GPU path builds its chunks the same way.
#[cfg(test)]
#[cfg_attr(not(feature = "gpu"), allow(dead_code))]
pub(crate) fn build_chunk(
    layouts: &[FileLayout],
    first_index: u32,
    output: OutputLayout,
) -> ChunkInputs {
    let mut pos = 0u64;
    let parts: Vec<Part> = layouts
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let p = Part::whole(i, &l.header, pos, output.output_bytes(&l.header));
            pos = p.out_end;
            p
        })
        .collect();
    let mut c = build_parts(layouts, &parts, 0, output);
    for info in &mut c.images {
        info.image_index += first_index;
    }
    c
}

/// Builds the inputs of a chunk made of `parts`, whose output binding starts at byte
/// `out_start` of the batch buffer.
pub(crate) fn build_parts(
    layouts: &[FileLayout],
    parts: &[Part],
    out_start: u64,
    output: OutputLayout,
) -> ChunkInputs {
    // Stream bytes, copied once into their words (plus one spare zero word).
    let data_len: usize = parts
        .iter()
        .map(|p| p.input(&layouts[p.image]).0 as usize)
        .sum();
    let mut input_words = vec![0u32; data_len.div_ceil(4) + 1];
    let input_bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut input_words);
    let mut filled = 0usize;
    let mut sizes: Vec<u32> = Vec::new();
    let mut images: Vec<ImageInfo> = Vec::new();
    let mut out_words_total = 0u32;
    for part in parts {
        let l = &layouts[part.image];
        let h = &l.header;
        let first_stream = sizes.len() as u32;
        for (s0, s1) in part.stream_runs(h) {
            let stream_bytes = &l.data[l.offsets[s0] as usize..l.offsets[s1] as usize];
            input_bytes[filled..filled + stream_bytes.len()].copy_from_slice(stream_bytes);
            filled += stream_bytes.len();
            sizes.extend(l.offsets[s0..=s1].windows(2).map(|w| (w[1] - w[0]) as u32));
        }
        let stream_count = sizes.len() as u32 - first_stream;
        // Bands start at a whole patch row (a multiple of 8 pixel rows), so on a word: the
        // decode's word index (out_base + byte / 4) needs no byte delta.
        debug_assert_eq!((part.out_pos - out_start) % 4, 0);
        let out_base = ((part.out_pos - out_start) / 4) as u32;
        images.push(ImageInfo {
            width: h.width,
            height: part.out_height,
            channels: h.channels() as u32,
            depth: h.depth as u32,
            patch_log2: h.patch_log2 as u32,
            patches_x: part.patch_cols,
            stream_base: first_stream,
            stream_count,
            out_base,
            out_words: part.out_len.div_ceil(4) as u32,
            image_index: part.image as u32,
            // Set below.
            wg_base: workgroups_of(h, stream_count),
            version: h.profile.version() as u32,
            patch_col0: part.patch_col0,
            patch_row0: part.patch_row0 - part.out_patch_row0,
            max_error: h.max_error as u32,
        });
        out_words_total = ((part.out_end - out_start) / 4) as u32;
    }
    debug_assert_eq!(filled, data_len);
    let norm = match output {
        OutputLayout::F32Chw(n) => n,
        OutputLayout::Interleaved => Normalize::UNIT,
    };
    // Version-1 images first, then version-2 ones (a stable sort): each version's entry
    // point is dispatched over a contiguous run of workgroups.
    images.sort_by_key(|i| i.version == VERSION_COMPACT);
    let mut wg_base = 0u32;
    let mut fast_workgroups = 0u32;
    for info in &mut images {
        let count = std::mem::replace(&mut info.wg_base, wg_base);
        wg_base += count;
        if info.version != VERSION_COMPACT {
            fast_workgroups = wg_base;
        }
    }
    let params = |first_workgroup: u32, count: u32| Params {
        count,
        image_count: images.len() as u32,
        input_bytes: data_len as u32,
        first_workgroup,
        mean: norm.mean,
        std: norm.std,
    };
    ChunkInputs {
        input_words,
        out_words: out_words_total,
        decode_params: params(0, fast_workgroups),
        compact_params: params(fast_workgroups, wg_base - fast_workgroups),
        sizes,
        images,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::{encode, EncodeOptions};
    use crate::error::Error;
    use crate::format::{parse_file, ParseOptions};
    use crate::gpu::cpu_twin;
    use crate::raw::{RawImage, Samples};
    use crate::{format::ColorType, limits::Limits};

    /// Plans a batch of version-1 and version-2 files with a small chunk limit (so images are
    /// split into bands and chunks), runs every chunk through the CPU twins, assembles the batch buffer as the GPU path
    /// does, and compares each image with the CPU decoder. No GPU needed.
    /// Files of both format versions, several patch sizes, 8 and 16 bits, 1 to 4 channels.
    fn test_files() -> Vec<Vec<u8>> {
        let mut files = Vec::new();
        for (i, &(w, h, c, depth)) in [
            (300u32, 300u32, 3u8, 8u8),
            (20, 10, 1, 8),
            (257, 199, 4, 16),
            (3, 30000, 1, 16),
            (123, 411, 2, 8),
        ]
        .iter()
        .enumerate()
        {
            let n = (w * h * c as u32) as usize;
            let samples: Vec<u16> = (0..n)
                .map(|k| ((k * 7 + k / 13 * 3) % if depth == 8 { 256 } else { 65536 }) as u16)
                .collect();
            let bytes: Vec<u8> = samples.iter().map(|&v| v as u8).collect();
            let image = RawImage {
                width: w,
                height: h,
                color: ColorType::from_channels(c).unwrap(),
                samples: if depth == 8 {
                    Samples::U8(&bytes)
                } else {
                    Samples::U16(&samples)
                },
            };
            // Both format versions: version 2 has one stream per patch.
            let opts = EncodeOptions {
                patch_log2: 3 + (i % 4) as u8,
                profile: crate::encode::ProfileOptions::default_for(if i % 2 == 0 {
                    crate::format::Profile::Compact
                } else {
                    crate::format::Profile::Fast
                }),
                ..Default::default()
            };
            files.push(encode(&image, &opts).unwrap());
        }
        files
    }

    #[test]
    fn banded_chunks_through_the_twins_match_the_cpu_decoder() {
        let files = test_files();
        let layouts: Vec<FileLayout> = files
            .iter()
            .map(|f| parse_file(f, &Limits::default(), ParseOptions::default()).unwrap())
            .collect();
        let output = OutputLayout::Interleaved;
        let plan = plan_batch(&layouts, output, 256 << 10, &[]).unwrap();
        assert!(plan.parts.len() > layouts.len(), "no image was split");
        assert!(plan.chunks.len() > 1);
        // The chunks cover the parts in order; every image starts on a 256-byte boundary.
        assert_eq!(plan.chunks[0].start, 0);
        assert_eq!(plan.chunks.last().unwrap().end, plan.parts.len());
        assert!(plan.chunks.windows(2).all(|w| w[0].end == w[1].start));
        assert!(plan.image_pos.iter().all(|p| p % OUT_ALIGN == 0));
        let mut buffer = vec![0u8; plan.total_out as usize];
        for chunk in &plan.chunks {
            let chunk_parts = &plan.parts[chunk.clone()];
            let start = plan.chunk_out_start(chunk);
            let c = build_parts(&layouts, chunk_parts, start, output);
            let (out, flags) = cpu_twin::run_chunk(&c, output);
            assert!(flags.iter().all(|&f| f == 0));
            // The decode writes from the first part's output on (the words before it, after
            // the aligned binding start, belong to the previous chunk and stay zero here).
            let from = (chunk_parts[0].out_pos - start) as usize;
            buffer[start as usize + from..start as usize + out.len()].copy_from_slice(&out[from..]);
        }
        for (f, &pos) in files.iter().zip(&plan.image_pos) {
            let (_, want) = crate::decode::decode(f, &Default::default()).unwrap();
            assert!(buffer[pos as usize..pos as usize + want.len()] == want[..]);
        }
        // f32 output is never split: the same batch is refused.
        assert!(matches!(
            plan_batch(
                &layouts,
                OutputLayout::F32Chw(Normalize::UNIT),
                256 << 10,
                &[]
            ),
            Err(Error::Limits(LimitsError::GpuBuffer { .. }))
        ));
    }

    /// Windows through the twins write the patches holding the window's pixels as the full
    /// decode has them, zero elsewhere (the CPU's window decode also skips rows below the
    /// window); the windows upload fewer stream bytes.
    #[test]
    fn windows_through_the_twins_match_the_cpu_window_decode() {
        let files = test_files();
        let layouts: Vec<FileLayout> = files
            .iter()
            .map(|f| parse_file(f, &Limits::default(), ParseOptions::default()).unwrap())
            .collect();
        let windows: Vec<Option<Window>> = layouts
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let (w, h) = (l.header.width, l.header.height);
                match i % 3 {
                    // An inner window, a corner one past the image's edge, none.
                    0 => Some(Window {
                        columns: w / 3..w / 3 + w / 4 + 1,
                        rows: h / 5..h / 2,
                    }),
                    1 => Some(Window {
                        columns: w - 1..w + 40,
                        rows: 0..3,
                    }),
                    _ => None,
                }
            })
            .collect();
        let output = OutputLayout::Interleaved;
        let whole = plan_batch(&layouts, output, u64::MAX >> 8, &[]).unwrap();
        let plan = plan_batch(&layouts, output, u64::MAX >> 8, &windows).unwrap();
        assert_eq!(plan.chunks.len(), 1);
        let c = build_parts(&layouts, &plan.parts, 0, output);
        let full = build_parts(&layouts, &whole.parts, 0, output);
        assert!(c.input_words.len() < full.input_words.len());
        let (out, flags) = cpu_twin::run_chunk(&c, output);
        assert!(flags.iter().all(|&f| f == 0));
        for ((l, w), &pos) in layouts.iter().zip(&windows).zip(&plan.image_pos) {
            let h = &l.header;
            let mut full = vec![0u8; h.output_bytes() as usize];
            crate::decode::decode_layout(l, &mut full, false).unwrap();
            let w = w.clone().unwrap_or(Window::whole(h.width, h.height));
            let p = h.patch_size();
            let held = |r: &std::ops::Range<u32>, len: u32| {
                r.start.min(len) / p * p..r.end.min(len).div_ceil(p) * p
            };
            let (xs, ys) = (held(&w.columns, h.width), held(&w.rows, h.height));
            let pixel = h.channels() as usize * h.bytes_per_sample();
            let mut want = vec![0u8; full.len()];
            for y in ys.start..ys.end.min(h.height) {
                let row = y as usize * h.width as usize * pixel;
                let span =
                    row + xs.start as usize * pixel..row + xs.end.min(h.width) as usize * pixel;
                want[span.clone()].copy_from_slice(&full[span]);
            }
            assert!(out[pos as usize..pos as usize + want.len()] == want[..]);
        }
    }

    /// An empty batch: one 256-byte output buffer (wgpu buffers are never empty), nothing to
    /// submit.
    #[test]
    fn empty_batch_plan() {
        let plan = plan_batch(&[], OutputLayout::Interleaved, 4096, &[]).unwrap();
        assert_eq!(plan.total_out, OUT_ALIGN);
        assert!(plan.image_pos.is_empty() && plan.parts.is_empty() && plan.chunks.is_empty());
    }
}
