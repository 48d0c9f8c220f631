//! Any bytes as loader options and a resume state (the Rust side of what a hostile
//! `load_state_dict` or `Loader(...)` call passes in): the partition, state and augmentation
//! checks return `Ok` or an error, never panic; what they accept plans as documented (the
//! step counts equal the steps built, every position lies in the epoch, `consumed` only
//! grows, the plain and stratified orders are permutations), and the augmentation's random crops lie inside the padded image and apply to a
//! small image without a panic.
#![no_main]
use l3::loader::{
    epoch_order, permutation, rank_steps, steps_per_epoch, worker_share, Augment, DropLast,
    LoaderState, Partition, RandomResizedCrop,
};
use libfuzzer_sys::fuzz_target;

/// Reads little-endian fields off the input (zeros once it runs out).
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let n = self.0.len().min(N);
        out[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        out
    }
    fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
    fn f32(&mut self) -> f32 {
        f32::from_le_bytes(self.take())
    }
}

/// Most steps built per input (the plan is linear in the steps; hostile sizes stay cheap).
const MAX_STEPS: u64 = 1 << 12;

fuzz_target!(|input: &[u8]| {
    let mut b = Bytes(input);
    let mode = b.u8();
    // Small epochs most of the time, any u32 otherwise.
    let n = if mode & 1 == 0 {
        b.u32() % 512
    } else {
        b.u32()
    } as u64;
    let partition = Partition {
        batch_size: b.u32(),
        world_size: b.u32(),
        rank: b.u32(),
        drop_last: [DropLast::Partial, DropLast::Drop, DropLast::Pad][b.u8() as usize % 3],
    };
    let state = LoaderState {
        seed: b.u64(),
        epoch: b.u64(),
        consumed: b.u64(),
    };
    let (worker, workers) = (b.u32(), b.u32());
    let strata = b.u32();
    if partition.validate().is_ok() {
        let per_epoch = steps_per_epoch(n, &partition);
        if per_epoch <= MAX_STEPS {
            let steps = rank_steps(n, 0, &partition);
            assert_eq!(steps.len() as u64, per_epoch);
            if workers > 0 && worker < workers {
                let kept = steps
                    .iter()
                    .skip(worker as usize)
                    .step_by(workers as usize)
                    .count();
                assert_eq!(kept as u64, worker_share(per_epoch, worker, workers));
            }
        }
        if state.validate(n).is_ok() {
            assert!(state.consumed <= n && state.epoch < u64::MAX);
            let left = steps_per_epoch(n - state.consumed, &partition);
            if left <= MAX_STEPS {
                let mut consumed = state.consumed;
                for s in rank_steps(n, state.consumed, &partition) {
                    assert!(s.consumed_after > consumed && s.consumed_after <= n);
                    consumed = s.consumed_after;
                    // Positions one by one only for short steps (a step is up to 2^32 long).
                    if s.len() <= MAX_STEPS {
                        assert!(s.positions(n).all(|p| p < n));
                    }
                }
            }
            if n <= 4096 {
                let mut p = permutation(state.seed, state.epoch, n as u32);
                p.sort_unstable();
                assert!(p.iter().enumerate().all(|(i, &v)| i as u32 == v));
                // The stratified order (any strata count) is a permutation too.
                let mut s = epoch_order(state.seed, state.epoch, n as u32, strata, 0);
                s.sort_unstable();
                assert!(s.iter().enumerate().all(|(i, &v)| i as u32 == v));
            }
        }
    }
    let mut a = Augment::with_size(b.u32(), b.u32());
    let flags = b.u8();
    a.crop = (flags & 1 == 1).then(|| RandomResizedCrop {
        scale: (b.f32(), b.f32()),
        ratio: (b.f32(), b.f32()),
    });
    a.channels = b.u8();
    a.flip_probability = b.f32();
    a.rotate90 = flags & 2 == 2;
    a.max_angle_degrees = if flags & 4 == 4 { b.f32() } else { 0.0 };
    a.padding = if flags & 8 == 8 { b.u32() } else { 0 };
    a.fill = b.f32();
    a.noise_std = if flags & 16 == 16 { b.f32() } else { 0.0 };
    for c in 0..4 {
        a.normalize.mean[c] = if flags & 32 == 32 { b.f32() } else { 0.5 };
        a.normalize.std[c] = if flags & 64 == 64 { b.f32() } else { 0.25 };
    }
    if a.validate(l3::Limits::default().max_dimension).is_err() {
        return;
    }
    // An image of up to 64 x 64 (1..=4 channels, 8 or 16 bits) and its sample's crop.
    let (w, h) = (1 + b.u8() as u32 % 64, 1 + b.u8() as u32 % 64);
    let channels = 1 + b.u8() % 4;
    let depth = if flags & 128 == 128 { 16 } else { 8 };
    let params = a.params(state.seed, state.epoch, b.u64(), w, h);
    let (x, y, cw, ch) = params.crop;
    let (pw, ph) = (
        w as u64 + 2 * a.padding as u64,
        h as u64 + 2 * a.padding as u64,
    );
    assert!(cw > 0 && ch > 0, "{params:?}");
    assert!(
        x as u64 + cw as u64 <= pw && y as u64 + ch as u64 <= ph,
        "{params:?} in {pw}x{ph}"
    );
    if a.output_len() > 1 << 16 {
        return;
    }
    let len = (w * h) as usize * channels as usize * (depth as usize / 8);
    let data: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(37)).collect();
    let image = l3::progressive::LevelImage {
        width: w,
        height: h,
        channels,
        depth,
        data,
    };
    let mut out = vec![0f32; a.output_len()];
    let _ = a.apply(&image, &params, &mut out);
});
