//! The GPU stages' planners on hostile inputs, without a GPU: fields (any bytes as two field
//! files), progressive levels (any bytes as a shard, every record at one level) and augment
//! (images, crops and output settings from the bytes), each under device limits taken from
//! the input. A plan is accepted or refused with an error; an accepted plan's every binding
//! and copy lies inside its buffer, aligned, within the limits (`check_bindings` never
//! reports an internal error). The decoded payloads are placed as the decoder places them:
//! one after another, each at a multiple of 256 bytes.
#![no_main]
use l3::field::gpu::plan_fields;
use l3::gpu::fuzzing::{check_bindings, BindLimits};
use l3::gpu::{ImageLayout, SampleType};
use l3::loader::gpu::plan_augment;
use l3::progressive::gpu::plan_levels;
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;
use common::with_crc;

const OUT_ALIGN: u64 = 256;

fuzz_target!(|input: &[u8]| {
    if input.len() < 4 {
        return;
    }
    let limits = BindLimits {
        max_binding: 1 << (8 + input[1] % 24),
        max_buffer: (1u64 << (8 + input[1] % 24)) << (input[2] % 4),
        storage_align: 1 << (2 + input[3] % 7),
    };
    let rest = &input[4..];
    match input[0] % 3 {
        0 => fields(rest, &limits),
        1 => levels(rest, &limits),
        _ => augment(rest, &limits),
    }
});

/// The checker's verdict on an accepted plan: a limits error is a fair answer; an internal
/// one is a planning bug.
fn checked(r: l3::Result<()>) {
    if let Err(l3::Error::Gpu(e)) = r {
        panic!("plan binds outside a buffer: {e}");
    }
}

/// Images placed one after another at multiples of 256 bytes, as the decoder does.
fn place(shapes: impl IntoIterator<Item = (u32, u32, u8, u8)>) -> (Vec<ImageLayout>, u64) {
    let mut end = 0u64;
    let images = shapes
        .into_iter()
        .map(|(width, height, channels, depth)| {
            let len = width as u64 * height as u64 * channels as u64 * (depth as u64 / 8);
            let l = ImageLayout {
                offset: end,
                len,
                width,
                height,
                channels,
                depth,
                sample_type: if depth == 16 {
                    SampleType::U16
                } else {
                    SampleType::U8
                },
                planar: false,
            };
            end = (end + len).next_multiple_of(OUT_ALIGN);
            l
        })
        .collect();
    (images, end.max(OUT_ALIGN))
}

fn fields(data: &[u8], limits: &BindLimits) {
    if data.len() < 2 {
        return;
    }
    let cut = (u16::from_le_bytes([data[0], data[1]]) as usize).min(data.len() - 2);
    // Both files get their CRC recomputed (the field target fuzzes the check itself), so
    // mutations reach the shapes and runs the plan is made of.
    let (a, b) = data[2..].split_at(cut);
    let (a, b) = (with_crc(a), with_crc(b));
    let layouts: Vec<_> = [&a, &b, &a]
        .into_iter()
        .filter_map(|f| l3::field::parse_field(f).ok())
        .collect();
    let Ok(plan) = plan_fields(&layouts, limits) else {
        return;
    };
    let (images, batch_len) = place(layouts.iter().map(|l| {
        let [nz, ny, nx] = l.header.shape;
        (nx, ny.saturating_mul(nz), 1, 16)
    }));
    checked(check_bindings(
        plan.bindings(&layouts, &images, batch_len),
        limits,
    ));
}

fn levels(data: &[u8], limits: &BindLimits) {
    let Some((&level, shard)) = data.split_first() else {
        return;
    };
    let Ok((header, _, records)) = l3::shard::format::parse_shard(shard) else {
        return;
    };
    let level = level % header.level_count.max(1);
    let payloads: Vec<Vec<&[u8]>> = records
        .iter()
        .map(|r| {
            r.levels
                .iter()
                .map(|l| &shard[l.offset as usize..(l.offset + l.len) as usize])
                .collect()
        })
        .collect();
    let stored: Vec<_> = records
        .iter()
        .zip(&payloads)
        .map(|(r, p)| r.stored(header.level_count, p))
        .collect();
    // What decode_levels decodes: each record's planned payloads, headers checked.
    let mut first = Vec::new();
    let mut shapes = Vec::new();
    for r in &stored {
        let Ok(plan) = r.plan(level) else { return };
        first.push(shapes.len());
        for shape in &plan {
            let Ok(h) = l3::read_header(r.payloads[shape.level as usize]) else {
                return;
            };
            if r.check_header(shape, &h).is_err() {
                return;
            }
            shapes.push((h.width, h.height, h.channels(), h.depth));
        }
    }
    let (decoded, batch_len) = place(shapes);
    if let Ok(plan) = plan_levels(&stored, level, &first, &decoded) {
        checked(check_bindings(plan.bindings(batch_len), limits));
    }
}

fn augment(data: &[u8], limits: &BindLimits) {
    if data.len() < 8 {
        return;
    }
    let u16_at = |i: usize| u16::from_le_bytes([data[i], data[i + 1]]) as u32;
    let mut aug = l3::loader::Augment::with_size(u16_at(0) % 600, u16_at(2) % 600);
    aug.channels = 1 + data[4] % 4;
    aug.padding = (data[5] % 32) as u32;
    if data[6] & 1 == 1 {
        aug.output = l3::loader::TensorType::F16;
    }
    // Per image, 14 bytes: shape, then crop, flip and quarter turns.
    let images: Vec<&[u8]> = data[8..].chunks_exact(14).take(16).collect();
    let (layouts, batch_len) = place(images.iter().map(|b| {
        let c = 1 + b[2] % 4;
        (
            1 + b[0] as u32 * 8,
            1 + b[1] as u32 * 8,
            c,
            if b[3] & 1 == 1 { 16 } else { 8 },
        )
    }));
    let params: Vec<l3::loader::AugmentParams> = images
        .iter()
        .map(|b| {
            let v = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]) as u32;
            l3::loader::AugmentParams {
                crop: (v(4), v(6), v(8), v(10)),
                flip: b[12] & 1 == 1,
                rot90: b[12] >> 1 & 3,
                rotation: (1.0, 0.0),
                noise_seed: b[13] as u32,
            }
        })
        .collect();
    if let Ok(plan) = plan_augment(&layouts, &params, &aug, limits) {
        assert_eq!(plan.shape[0], layouts.len());
        checked(check_bindings(plan.bindings(&layouts, batch_len), limits));
    }
}
