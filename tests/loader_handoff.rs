//! The GPU loader's hand-offs (`LoaderOptions::gpu_output`) give the read-back path's bytes:
//! staged batches copied out, and batches left on the GPU copied into a small pool of
//! exported buffers (Vulkan external memory, reused batch after batch as the Python CUDA
//! hand-off does), then re-imported from their fds and read, over several epochs, in f32 and
//! f16. The read-back path itself is held to the CPU path in tests/loader.rs.
#![cfg(all(feature = "gpu", feature = "image", feature = "dataset"))]

mod common;
#[path = "common/gpu_support.rs"]
mod gpu_support;

use std::path::Path;
use std::sync::Arc;

use l3::loader::handoff::{GpuOutput, HandOffValues};
use l3::loader::{
    Augment, Batch, DropLast, Loader, LoaderOptions, LoaderState, Partition, TensorType,
};
use l3::progressive::{encode_levels, ProgressiveOptions};
use l3::shard::{Dataset, Manifest, RecordInput, ShardInfo, ShardWriter, MANIFEST_VERSION};
use l3::{EncodeOptions, Profile};

/// The bundled PNG samples twice each, one level, 5 records per shard.
fn pack(dir: &Path) {
    let mut files = common::files_under(&common::samples_dir());
    files.retain(|p| p.extension().is_some_and(|e| e == "png"));
    let opts = EncodeOptions::for_profile(Profile::Fast);
    let progressive = ProgressiveOptions {
        levels: 1,
        ..Default::default()
    };
    let mut records = Vec::new();
    for j in 0..2 {
        for (i, f) in files.iter().enumerate() {
            let img = l3::read_image(f).unwrap();
            let raw = l3::image_support::raw_image(&img).unwrap();
            records.push(RecordInput {
                key: format!("copy{j}/{i}"),
                class: Some(i as u32),
                meta: Vec::new(),
                width: img.width(),
                height: img.height(),
                levels: encode_levels(&raw, &progressive, &opts).unwrap(),
            });
        }
    }
    let mut shards = Vec::new();
    for (s, chunk) in records.chunks(5).enumerate() {
        let mut w = ShardWriter::new(1).unwrap();
        for r in chunk {
            w.add(r.clone()).unwrap();
        }
        let file = format!("shard-{s:05}.l3s");
        let bytes = w.to_bytes();
        l3::shard::write_atomic(&dir.join(&file), &bytes).unwrap();
        shards.push(ShardInfo::of_shard(file, &bytes).unwrap());
    }
    Manifest {
        version: MANIFEST_VERSION,
        levels: 1,
        classes: (0..files.len()).map(|i| format!("c{i}")).collect(),
        records: records.len() as u64,
        shards,
    }
    .write(dir)
    .unwrap();
}

fn run(
    ds: &Arc<Dataset>,
    gpu: &Arc<l3::gpu::GpuDecoder>,
    output: GpuOutput,
    element: TensorType,
) -> Vec<Batch> {
    let mut o = LoaderOptions::new(Partition {
        batch_size: 4,
        world_size: 1,
        rank: 0,
        drop_last: DropLast::Partial,
    });
    o.seed = 5;
    o.end_epoch = 3;
    o.augment = Augment::with_size(40, 32);
    o.augment.output = element;
    o.gpu = Some(gpu.clone());
    o.gpu_output = output;
    Loader::new(ds.clone(), o, LoaderState::default())
        .unwrap()
        .map(|b| b.unwrap())
        .collect()
}

/// Staged batches, copied out, are the read-back batches byte for byte (same samples, same
/// order), over three epochs, in f32 and f16; their `data` is empty.
#[test]
fn staged_batches_equal_the_read_back_batches() {
    if gpu_support::gpu().is_none() {
        return;
    }
    let gpu = Arc::new(l3::gpu::GpuDecoder::new_default().unwrap());
    let dir = tempfile::tempdir().unwrap();
    pack(dir.path());
    let ds = Arc::new(Dataset::open(dir.path()).unwrap());
    for element in [TensorType::F32, TensorType::F16] {
        let want = run(&ds, &gpu, GpuOutput::ReadBack, element);
        let got = run(&ds, &gpu, GpuOutput::Staged, element);
        assert_eq!(want.len(), got.len());
        assert!(want.iter().map(|b| b.epoch).max() == Some(2));
        for (w, g) in want.iter().zip(&got) {
            assert_eq!(
                (w.epoch, &w.samples, w.shape),
                (g.epoch, &g.samples, g.shape)
            );
            assert!(w.gpu.is_none() && g.data.is_empty());
            let h = g
                .gpu
                .as_deref()
                .expect("a staged batch without its hand-off");
            let HandOffValues::Staged(staged) = &h.values else {
                panic!("a staged batch left on the GPU");
            };
            assert_eq!((h.image_shape(), h.element), (Some(w.shape), element));
            assert_eq!(h.views.len(), 1);
            assert_eq!(h.bytes(), w.data.as_bytes().len() as u64);
            let mut bytes = vec![0u8; h.bytes() as usize];
            staged.copy_to(&mut bytes).unwrap();
            assert!(
                bytes == w.data.as_bytes(),
                "epoch {}: staged bytes differ",
                w.epoch
            );
            // Asking for more than was staged is an error, not a read past the mapping.
            let mut more = vec![0u8; staged.len() as usize + 4];
            assert!(matches!(staged.copy_to(&mut more), Err(l3::Error::Gpu(_))));
        }
    }
}

/// Batches left on the GPU, copied into a pool of two exported buffers reused in turn (each
/// buffer's fd re-imported as Vulkan memory once and read after every refill), are the
/// read-back batches byte for byte over three epochs, in f32 and f16. Runs wherever the
/// device can export memory (lavapipe can); with `CI=true` its absence fails.
#[cfg(all(feature = "interop", unix))]
#[test]
fn batches_left_on_the_gpu_export_into_reused_buffers_with_equal_bytes() {
    use l3::gpu::interop::{export_supported, exportable_buffer};
    if gpu_support::gpu().is_none() {
        return;
    }
    let gpu = Arc::new(l3::gpu::GpuDecoder::new_default().unwrap());
    if !export_supported(gpu.device()) {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true and the adapter cannot export memory as fds"
        );
        println!("SKIPPED: no VK_KHR_external_memory_fd");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    pack(dir.path());
    let ds = Arc::new(Dataset::open(dir.path()).unwrap());
    for element in [TensorType::F32, TensorType::F16] {
        let want = run(&ds, &gpu, GpuOutput::ReadBack, element);
        let got = run(&ds, &gpu, GpuOutput::Device, element);
        assert_eq!(want.len(), got.len());
        let capacity = want
            .iter()
            .map(|b| b.data.as_bytes().len() as u64)
            .max()
            .unwrap()
            .next_multiple_of(4);
        // The pool: exported buffers, each imported once (as CUDA imports each slot once).
        let mut pool = Vec::new();
        for _ in 0..2 {
            let exported = exportable_buffer(gpu.device(), capacity).unwrap();
            let imported = gpu_support::reimport(&gpu, &exported, capacity);
            pool.push((exported, imported));
        }
        for (k, (w, g)) in want.iter().zip(&got).enumerate() {
            assert_eq!(
                (w.epoch, &w.samples, w.shape),
                (g.epoch, &g.samples, g.shape)
            );
            assert!(g.data.is_empty());
            let h = g
                .gpu
                .as_deref()
                .expect("a device batch without its hand-off");
            let HandOffValues::Device {
                buffer,
                device,
                queue,
            } = &h.values
            else {
                panic!("a device batch staged");
            };
            assert_eq!(h.image_shape(), Some(w.shape));
            let len = h.bytes();
            assert_eq!(len, w.data.as_bytes().len() as u64);
            let (exported, imported) = &pool[k % pool.len()];
            let size = len.next_multiple_of(4);
            exported.copy_from(device, queue, buffer, size).unwrap();
            let bytes = gpu_support::read_buffer(&gpu, imported, size);
            assert!(
                bytes[..len as usize] == *w.data.as_bytes(),
                "epoch {}, batch {k}: exported bytes differ",
                w.epoch
            );
            // A copy larger than the exported buffer is refused.
            assert!(exported
                .copy_from(device, queue, buffer, capacity + 4)
                .is_err());
        }
    }
}
