//! The decode stage (feature `dataset`): a step's records, read or cached, decoded at the
//! requested level and augmented, on the loader's pool one sample per task
//! ([`Decode::on_cpu`]: only the patches of each random crop where the level allows, then
//! [`super::augment`]), or on the GPU as one batch ([`Decode::on_gpu`]: the level decode, then
//! [`super::gpu::augment`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::augment::{Augment, AugmentParams};
#[cfg(feature = "gpu")]
use super::batch::{reject, Batch};
use super::options::LoaderOptions;
use super::read::Payloads;
use super::tensor::{f32_to_f16_bits, Tensor};
use crate::error::{Error, Result};
use crate::layout::Window;
#[cfg(feature = "gpu")]
use crate::progressive::gpu::decode_levels_windows;
use crate::progressive::{decode_level_window, level_dims, StoredLevels};
use crate::shard::Dataset;

/// One sample decoded and augmented into its slot of the batch tensor: the decode time and
/// the augment time.
pub(super) type Decoded = Result<(Duration, Duration)>;

/// A task's slot in the batch tensor: `per` values of the tensor's type.
pub(super) enum Slot<'a> {
    /// f32 values.
    F32(&'a mut [f32]),
    /// f16 values, as bits.
    F16(&'a mut [u16]),
}

impl<'a> Slot<'a> {
    /// The batch tensor `out` cut into slots of `per` values, one per sample, in order.
    pub(super) fn cut(out: &'a mut Tensor, per: usize) -> impl Iterator<Item = Slot<'a>> {
        let (f32s, f16s) = match out {
            Tensor::F32(v) => (Some(v.chunks_mut(per.max(1)).map(Slot::F32)), None),
            Tensor::F16(v) => (None, Some(v.chunks_mut(per.max(1)).map(Slot::F16))),
        };
        f32s.into_iter().flatten().chain(f16s.into_iter().flatten())
    }

    /// Fills the slot by `write`, which writes f32 values: in place, or through the thread's
    /// scratch then rounded to f16.
    pub(super) fn fill(self, write: impl FnOnce(&mut [f32]) -> Result<()>) -> Result<()> {
        match self {
            Slot::F32(values) => write(values),
            Slot::F16(bits) => SCRATCH.with(|scratch| {
                let mut scratch = scratch.borrow_mut();
                scratch.resize(bits.len(), 0.0);
                write(&mut scratch)?;
                for (b, &x) in bits.iter_mut().zip(scratch.iter()) {
                    *b = f32_to_f16_bits(x);
                }
                Ok(())
            }),
        }
    }
}

/// `work(k, payloads[k], slots[k])` for every sample `k` on `pool`, one sample per task,
/// results in order: a sample with an error in `errors[k]` (taken) is that error, and every
/// sample not started when `stop` is set is [`Error::LoaderThread`] (image and tensor
/// records).
pub(super) fn per_sample<P: Sync, S: Send, T: Send>(
    pool: &rayon::ThreadPool,
    stop: &AtomicBool,
    payloads: &[Option<P>],
    errors: &mut [Option<Error>],
    slots: Vec<S>,
    work: impl Fn(usize, &P, S) -> Result<T> + Sync,
) -> Vec<Result<T>> {
    pool.install(|| {
        payloads
            .par_iter()
            .zip(errors.par_iter_mut())
            .zip(slots.into_par_iter())
            .enumerate()
            .map(|(k, ((p, err), slot))| {
                if let Some(e) = err.take() {
                    return Err(e);
                }
                if stop.load(Ordering::Relaxed) {
                    return Err(Error::LoaderThread("the loader is stopping".into()));
                }
                work(k, p.as_ref().expect("read or cached"), slot)
            })
            .collect()
    })
}

thread_local! {
    /// Each pool thread's f32 scratch for an f16 batch (the augmentation computes f32).
    static SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// What decoding a step's records needs: the dataset, the loader's options, the level read,
/// and the run's seed and the step's epoch (the augmentation's parameters depend on them).
#[derive(Clone, Copy)]
pub(super) struct Decode<'a> {
    /// The dataset the records come from.
    pub dataset: &'a Dataset,
    /// The loader's options.
    pub options: &'a LoaderOptions,
    /// The level to decode.
    pub level: u8,
    /// The run's seed.
    pub seed: u64,
    /// The step's epoch.
    pub epoch: u64,
}

impl Decode<'_> {
    /// Decodes and augments sample `ids[k]` from `payloads[k]` into slot `k` of `out` (`per`
    /// values each; `out` holds `ids.len() * per`) on `pool`, one sample per task, so the
    /// batch tensor is written in place by the pool's threads, with no per-sample buffer and
    /// no serial copy. A sample with an error in `errors[k]` (taken) is that error, and every
    /// sample not started when `stop` is set is [`Error::LoaderThread`]; a failed sample's
    /// slot is left as it was.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_cpu(
        &self,
        pool: &rayon::ThreadPool,
        stop: &AtomicBool,
        ids: &[u32],
        payloads: &[Option<Payloads>],
        errors: &mut [Option<Error>],
        per: usize,
        out: &mut Tensor,
    ) -> Vec<Decoded> {
        debug_assert_eq!(out.len(), ids.len() * per);
        let slots: Vec<Slot<'_>> = Slot::cut(out, per).collect();
        per_sample(pool, stop, payloads, errors, slots, |k, p, slot| {
            self.decode_augment(ids[k] as u64, p, slot)
        })
    }

    /// One sample on the CPU: its stored levels, the crop chosen, the window decoded, the
    /// crop augmented into `slot`.
    fn decode_augment(&self, sample: u64, payloads: &[Vec<u8>], slot: Slot<'_>) -> Decoded {
        let t0 = Instant::now();
        let level = self.level;
        let (s, r) = self.dataset.locate(sample)?;
        let shard = &self.dataset.shards()[s];
        let refs: Vec<&[u8]> = payloads.iter().map(|p| p.as_slice()).collect();
        let stored: StoredLevels = shard.stored_levels(r, &refs)?;
        // The crop is chosen before decoding, so only the patches it reads are decoded where
        // the level allows.
        let aug = &self.options.augment;
        let (w, h) = level_dims(stored.width, stored.height, stored.level_count, level);
        let params = aug.params(self.seed, self.epoch, sample, w, h);
        let window = self
            .options
            .crop_window_decode
            .then(|| crop_window(&params, aug))
            .flatten()
            .unwrap_or(Window::whole(w, h));
        let (columns, rows) = (window.columns, window.rows);
        let image = decode_level_window(&stored, level, columns, rows, &self.options.decode)?;
        let t1 = Instant::now();
        match slot {
            Slot::F32(values) => aug.apply(&image, &params, values)?,
            Slot::F16(bits) => SCRATCH.with(|scratch| {
                let mut scratch = scratch.borrow_mut();
                scratch.resize(bits.len(), 0.0);
                aug.apply(&image, &params, &mut scratch)?;
                for (b, &x) in bits.iter_mut().zip(scratch.iter()) {
                    *b = f32_to_f16_bits(x);
                }
                Ok::<_, Error>(())
            })?,
        }
        Ok((t1 - t0, t1.elapsed()))
    }

    /// The GPU path: the good samples' payloads decoded as one GPU batch, augmented by
    /// `augment.wgsl`, handed off into `out` by `gpu_output` (its samples, classes, data, decode and augment
    /// times). A sample with an error in `errors` (taken), or one the GPU batch refuses (its
    /// index is in the error), is skipped or fails the batch by [`super::OnError`], and the
    /// batch is retried without it.
    #[cfg(feature = "gpu")]
    pub(super) fn on_gpu(
        &self,
        gpu: &crate::gpu::GpuDecoder,
        ids: &[u32],
        payloads: Vec<Option<Payloads>>,
        mut errors: Vec<Option<Error>>,
        out: &mut Batch,
    ) -> Result<()> {
        let (seed, epoch) = (self.seed, self.epoch);
        let aug = &self.options.augment;
        let level = self.level;
        let on_error = self.options.on_error;
        for (k, e) in errors.iter_mut().enumerate() {
            if let Some(e) = e.take() {
                reject(self.dataset, on_error, out, ids[k] as u64, e)?;
            }
        }
        let mut live: Vec<usize> = (0..ids.len()).filter(|&k| payloads[k].is_some()).collect();
        while !live.is_empty() {
            let t0 = Instant::now();
            let refs: Vec<Vec<&[u8]>> = live
                .iter()
                .map(|&k| {
                    let p = payloads[k].as_ref().expect("live samples have payloads");
                    p.iter().map(|x| x.as_slice()).collect()
                })
                .collect();
            let mut stored = Vec::with_capacity(live.len());
            for (&k, r) in live.iter().zip(&refs) {
                let (s, i) = self.dataset.locate(ids[k] as u64)?;
                stored.push(self.dataset.shards()[s].stored_levels(i, r)?);
            }
            // The crops are chosen before decoding, so only the patches they read are decoded
            // where the level allows (as on the CPU path, `crop_window`).
            let params: Vec<_> = live
                .iter()
                .zip(&stored)
                .map(|(&k, r)| {
                    let (w, h) = level_dims(r.width, r.height, r.level_count, level);
                    aug.params(seed, epoch, ids[k] as u64, w, h)
                })
                .collect();
            let windows: Vec<Option<Window>> = if self.options.crop_window_decode {
                params.iter().map(|p| crop_window(p, aug)).collect()
            } else {
                Vec::new()
            };
            let decoded = match decode_levels_windows(gpu, &stored, level, &windows) {
                Ok(b) => b,
                Err(Error::InBatch { image, error }) if image < live.len() => {
                    let k = live.remove(image);
                    reject(self.dataset, on_error, out, ids[k] as u64, *error)?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let t1 = Instant::now();
            let tensor = super::gpu::augment(gpu, &decoded, &params, aug)?;
            super::gpu::hand_off(tensor, self.options.gpu_output, out)?;
            out.times.decode = t1 - t0;
            out.times.augment = t1.elapsed();
            for &k in &live {
                let sample = ids[k] as u64;
                out.samples.push(sample);
                out.classes.push(self.dataset.entry(sample)?.class);
            }
            break;
        }
        Ok(())
    }
}

/// The pixels of a level image that the augmentation `params` reads: the crop and one pixel
/// around it (the bilinear taps), for the separable path; `None` (the whole image) for the
/// general map (turns, rotation, padding), which may read anywhere.
fn crop_window(params: &AugmentParams, aug: &Augment) -> Option<Window> {
    if params.is_general(aug.padding) {
        return None;
    }
    let (x, y, cw, ch) = params.crop;
    Some(Window {
        columns: x.saturating_sub(1)..x + cw + 1,
        rows: y.saturating_sub(1)..y + ch + 1,
    })
}
