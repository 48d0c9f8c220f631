//! The host cost of a batch, pinned (issue 45's per-batch budget): counted by the decoder's
//! own counters (`Context::counts`) on a decoder of its own, so no other test's work mixes
//! in. From the second equal batch on, an image batch of one chunk is one submission with
//! its flags' read-back, creating only the output, the flags and their staging copy; a
//! lossless or error-bounded float batch is one submission creating only its output (the
//! tables, steps and flags' copy are pooled). `examples/kernel_budget.rs` prints the same
//! counts as a table.
//!
//! On a machine without a GPU: `WGPU_BACKEND=vulkan cargo test --release --test
//! gpu_batch_budget`.
#![cfg(feature = "gpu")]

#[path = "common/gpu_support.rs"]
mod gpu_support;

use l3::field::{encode_bounded, encode_lossless, BoundedOptions, FloatSlice, LosslessOptions};
use l3::gpu::{Counts, GpuDecoder, OutputLayout};

#[test]
fn equal_batches_after_the_first_cost_one_submission_and_no_pooled_buffers() {
    if gpu_support::gpu().is_none() {
        return;
    }
    let adapter = l3::gpu::select_adapter().unwrap();
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("budget"),
        required_limits: l3::gpu::required_limits(&adapter),
        ..Default::default()
    }))
    .unwrap();
    let decoder = GpuDecoder::new(&device, &queue).unwrap();
    let second = |run: &dyn Fn()| -> Counts {
        run();
        let before = decoder.counts();
        run();
        decoder.counts() - before
    };

    let images = gpu_support::random_files(7, 5);
    let refs: Vec<&[u8]> = images.iter().map(Vec::as_slice).collect();
    let c = second(&|| {
        let batch = decoder
            .decode_batch(&refs, OutputLayout::Interleaved)
            .unwrap();
        gpu_support::assert_matches_cpu(&batch, &images, "budget");
    });
    // (The check reads the images back through the batch's own queue, not counted.)
    assert_eq!((c.submissions, c.buffers, c.readbacks), (1, 3, 1), "{c:?}");

    let v: Vec<f32> = (0..60_000)
        .map(|i| (i as f32 * 0.003).sin() * 70.0)
        .collect();
    let lossless = encode_lossless(
        FloatSlice::F32(&v),
        &[200, 300],
        &LosslessOptions::default(),
    )
    .unwrap();
    let bounded = encode_bounded(&v, &[60_000], &BoundedOptions::new(0.05)).unwrap();
    let c = second(&|| {
        l3::field::gpu::decode_lossless_fields(&decoder, &[&lossless]).unwrap();
    });
    assert_eq!((c.submissions, c.buffers, c.readbacks), (1, 1, 1), "{c:?}");
    let c = second(&|| {
        l3::field::gpu::decode_bounded_fields(&decoder, &[&bounded], &Default::default()).unwrap();
    });
    assert_eq!((c.submissions, c.buffers, c.readbacks), (1, 1, 1), "{c:?}");
}

/// Float batches timed with GPU timestamps (`set_timing(true)`, on a device with
/// `TIMESTAMP_QUERY`: lavapipe has it) carry their kernels' GPU time, summed over the
/// sub-batches; untimed ones and empty ones carry none; timing changes no value.
#[test]
fn float_batches_carry_their_kernel_time_where_timing_is_on() {
    let Some(shared) = gpu_support::gpu() else {
        return;
    };
    let mut decoder = GpuDecoder::new(shared.device(), shared.queue()).unwrap();
    let v: Vec<f32> = (0..90_000)
        .map(|i| (i as f32 * 0.002).cos() * 40.0 + (i % 7) as f32)
        .collect();
    let lossless = encode_lossless(
        FloatSlice::F32(&v),
        &[300, 300],
        &LosslessOptions::default(),
    )
    .unwrap();
    let bounded = encode_bounded(&v, &[300, 300], &BoundedOptions::new(0.01)).unwrap();
    let files = |f: &Vec<u8>| vec![f.clone(); 3];
    let (lf, bf) = (files(&lossless), files(&bounded));
    let (lr, br): (Vec<&[u8]>, Vec<&[u8]>) = (
        lf.iter().map(Vec::as_slice).collect(),
        bf.iter().map(Vec::as_slice).collect(),
    );
    let run = |d: &GpuDecoder| {
        let l = l3::field::gpu::decode_lossless_fields(d, &lr).unwrap();
        let b = l3::field::gpu::decode_bounded_fields(d, &br, &Default::default()).unwrap();
        let values: Vec<Vec<u8>> = (0..3)
            .flat_map(|i| [l.read_back_bytes(i).unwrap(), b.read_back_bytes(i).unwrap()])
            .collect();
        (l.kernel_ns, b.kernel_ns, values)
    };
    let (l0, b0, untimed) = run(&decoder);
    assert_eq!((l0, b0), (None, None));
    let supported = decoder.set_timing(true);
    assert_eq!(supported, decoder.timing_supported());
    let (l1, b1, timed) = run(&decoder);
    assert!(timed == untimed, "timing changed the values");
    if supported {
        eprintln!("lossless kernels {l1:?} ns, error-bounded {b1:?} ns");
        assert!(l1.is_some_and(|ns| ns > 0) && b1.is_some_and(|ns| ns > 0));
        let empty = l3::field::gpu::decode_lossless_fields(&decoder, &[]).unwrap();
        assert_eq!(empty.kernel_ns, None);
    } else {
        assert_eq!((l1, b1), (None, None));
    }
    decoder.set_timing(false);
    let (l2, b2, _) = run(&decoder);
    assert_eq!((l2, b2), (None, None));
}
