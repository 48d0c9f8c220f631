//! [`Context`] (also named [`GpuDecoder`]): the device, queue and pipelines every kernel runs
//! with (the decoder's, the data side's, the encoder's when made from it), the decoder's
//! settings, and the batch API (blocking, with flags, timed, async).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::abi::{scan_levels, OUT_ALIGN};
use super::counters::{Counters, Counts};
use super::device::{max_chunk_limit, request_device, select_adapter, Pipelines};
use super::readback::{check_flags, Finished, GpuBatch, Poller};
use super::timing::StageTimings;
use super::upload::{Needs, Scratch};
use crate::decode::DecodeOptions;
use crate::error::{LimitsError, Result};
use crate::layout::{OutputLayout, Window};

/// The GPU context: the device and queue, its limits, the kernel families compiled on first
/// use, the scratch buffers reused between batches, and the decoder's settings. Every GPU
/// stage of l3 runs on one (image decode, levels, augment, fields, float arrays, tensor
/// windows; [`super::GpuEncoder::from_decoder`] shares its device).
pub struct Context {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    adapter_info: Option<wgpu::AdapterInfo>,
    pub(crate) pipelines: Pipelines,
    pub(crate) chunk_limit: u64,
    pub(crate) uniform_align: u64,
    pub(crate) options: DecodeOptions,
    pub(crate) scratch: Mutex<Option<Scratch>>,
    /// The float-array kernels' buffers kept between batches (`gpu::chunked`).
    pub(crate) float_pool: Mutex<super::chunked::FloatPool>,
    pub(crate) timing: bool,
    last_timings: Mutex<Option<StageTimings>>,
    /// GPU buffers (re)allocated for scratch so far (see [`GpuDecoder::count_allocation`]).
    allocations: AtomicU64,
    /// The host-side work asked of the device so far ([`Context::counts`]).
    pub(crate) counters: Counters,
    /// The first GPU error no error scope caught, on a device this decoder created (wgpu's
    /// default handler panics): [`GpuDecoder::with_error_scopes`] reports it as [`Error::Gpu`].
    pub(crate) uncaptured: Arc<Mutex<Option<String>>>,
}

/// [`Context`]'s first name, kept: most of l3's API and its users call it the decoder.
pub type GpuDecoder = Context;

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("gpu::Context")
            .field("adapter", &self.adapter_name())
            .field("chunk_limit", &self.chunk_limit)
            .finish()
    }
}

impl Context {
    /// A decoder on the caller's device and queue (handles are cloned). Creates the pipelines.
    pub fn new(device: &wgpu::Device, queue: &wgpu::Queue) -> Result<Self> {
        let limits = device.limits();
        let pipelines = Pipelines::new(device)?;
        Ok(Context {
            device: device.clone(),
            queue: queue.clone(),
            adapter_info: None,
            pipelines,
            chunk_limit: max_chunk_limit(&limits),
            uniform_align: (limits.min_uniform_buffer_offset_alignment as u64).max(256),
            options: DecodeOptions::default(),
            scratch: Mutex::new(None),
            float_pool: Mutex::default(),
            timing: false,
            last_timings: Mutex::new(None),
            allocations: AtomicU64::new(0),
            counters: Default::default(),
            uncaptured: Arc::new(Mutex::new(None)),
        })
    }

    /// A decoder on a new device of `adapter`, asking for the adapter's largest buffers, and
    /// for [`wgpu::Features::TIMESTAMP_QUERY`] when the adapter supports it (used only when
    /// timing is asked for: [`GpuDecoder::set_timing`]).
    pub fn with_adapter(adapter: &wgpu::Adapter) -> Result<Self> {
        let (device, queue) = request_device(adapter)?;
        let mut d = GpuDecoder::new(&device, &queue)?;
        d.adapter_info = Some(adapter.get_info());
        // The device is ours: an error outside every scope is kept for the next operation
        // to report, instead of wgpu's default handler panicking on whichever thread hit it.
        let slot = Arc::clone(&d.uncaptured);
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let mut first = slot.lock().unwrap_or_else(|p| p.into_inner());
            first.get_or_insert_with(|| e.to_string());
        }));
        Ok(d)
    }

    /// A decoder on the adapter [`select_adapter`] picks (respects `WGPU_ADAPTER_NAME` and
    /// `WGPU_BACKEND`).
    pub fn new_default() -> Result<Self> {
        GpuDecoder::with_adapter(&select_adapter()?)
    }

    /// The adapter's description, when the decoder created its own device.
    pub fn adapter_info(&self) -> Option<&wgpu::AdapterInfo> {
        self.adapter_info.as_ref()
    }

    /// Whether the adapter is a software rasteriser running on the CPU (e.g. Mesa's lavapipe):
    /// correct, but not GPU speed.
    pub fn is_software(&self) -> bool {
        self.adapter_info
            .as_ref()
            .is_some_and(|i| i.device_type == wgpu::DeviceType::Cpu)
    }

    /// The adapter's name and backend, or "caller-provided device".
    pub fn adapter_name(&self) -> String {
        match &self.adapter_info {
            Some(i) => format!("{} ({:?}, {:?})", i.name, i.backend, i.device_type),
            None => "caller-provided device".into(),
        }
    }

    /// The device.
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// The queue.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    /// Largest buffer binding a chunk uses, in bytes (the device's
    /// `max_storage_buffer_binding_size`, at most 2 GiB).
    pub fn chunk_limit(&self) -> u64 {
        self.chunk_limit
    }

    /// Lowers the chunk size (to save memory, or to test chunking); clamped to
    /// 4096..=the device limit, rounded down to 256 bytes.
    pub fn set_chunk_limit(&mut self, bytes: u64) {
        let max = max_chunk_limit(&self.device.limits());
        self.chunk_limit = bytes.clamp(4096, max) / OUT_ALIGN * OUT_ALIGN;
    }

    /// Options for the CPU-side parse (limits, checksum); `parallel` is ignored.
    pub fn set_options(&mut self, options: DecodeOptions) {
        self.options = options;
    }

    /// The options of the CPU-side parse ([`GpuDecoder::set_options`]).
    pub fn options(&self) -> &DecodeOptions {
        &self.options
    }

    /// Counts one GPU buffer (re)allocation of the reusable buffers.
    pub(crate) fn count_allocation(&self) {
        self.count_allocations(1);
    }

    /// Counts `n` reusable GPU buffers (re)allocated.
    pub(crate) fn count_allocations(&self, n: u64) {
        self.allocations.fetch_add(n, Ordering::Relaxed);
        self.count_buffers(n);
    }

    /// Reusable GPU buffers (scratch) (re)allocated so far.
    #[cfg(test)]
    pub(crate) fn allocations(&self) -> u64 {
        self.allocations.load(Ordering::Relaxed)
    }

    /// Whether the device has [`wgpu::Features::TIMESTAMP_QUERY`], i.e. whether
    /// [`GpuDecoder::set_timing`] and [`GpuDecoder::decode_batch_timed`] can measure stages.
    pub fn timing_supported(&self) -> bool {
        self.device
            .features()
            .contains(wgpu::Features::TIMESTAMP_QUERY)
    }

    /// Turns per-stage GPU timing on or off for [`GpuDecoder::decode_batch`],
    /// [`GpuDecoder::decode_batch_with_flags`] and [`GpuDecoder::decode_batch_async`]; the
    /// timings of the last such batch are then in [`GpuDecoder::last_stage_timings`]. The
    /// lossless and error-bounded float decodes (`field::gpu`) then carry their kernels' GPU
    /// time in `GpuArrayBatch::kernel_ns`. Off by
    /// default: timing costs a query set, a resolve and a small read-back per batch. Returns
    /// whether timing is now on: `false` when the device lacks
    /// [`wgpu::Features::TIMESTAMP_QUERY`] (the request is then ignored and batches decode as
    /// usual).
    pub fn set_timing(&mut self, on: bool) -> bool {
        self.timing = on && self.timing_supported();
        if !self.timing {
            *self.last_timings.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
        self.timing
    }

    /// Per-stage GPU times of the last batch decoded with timing on ([`GpuDecoder::set_timing`]
    /// or [`GpuDecoder::decode_batch_timed`]), or `None` when no batch was timed (timing off,
    /// or not supported by the device).
    pub fn last_stage_timings(&self) -> Option<StageTimings> {
        *self.last_timings.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Like [`GpuDecoder::decode_batch`], with this batch's per-stage GPU times whatever
    /// [`GpuDecoder::set_timing`] says: `None` when the device lacks
    /// [`wgpu::Features::TIMESTAMP_QUERY`] (the batch is still decoded).
    pub fn decode_batch_timed(
        &self,
        files: &[&[u8]],
        output: OutputLayout,
    ) -> Result<(GpuBatch, Option<StageTimings>)> {
        let r = self.decode_blocking(files, output, true, &[])?;
        check_flags(&r.flags)?;
        Ok((r.batch, r.timings))
    }

    /// Submits (timed if `timed` and supported), waits, and reads the flags and timings.
    fn decode_blocking(
        &self,
        files: &[&[u8]],
        output: OutputLayout,
        timed: bool,
        windows: &[Option<Window>],
    ) -> Result<Finished> {
        let pending = self.submit(files, output, timed, windows)?;
        let r = pollster::block_on(pending.finish(Poller::Block))?;
        self.record_timings(r.timings);
        Ok(r)
    }

    fn record_timings(&self, t: Option<StageTimings>) {
        if t.is_some() {
            *self.last_timings.lock().unwrap_or_else(|e| e.into_inner()) = t;
        }
    }

    /// Decodes a batch of L3 files into one GPU buffer (blocking until the GPU is done).
    ///
    /// Errors:
    /// - headers, size tables, checksums and [`crate::limits::Limits`] are checked on the CPU for
    ///   every file before anything is submitted; the first bad file fails the whole batch
    ///   with [`crate::error::Error::InBatch`]: its index in `files` and the CPU decoder's error for
    ///   it (to decode the good files of a batch anyway, see [`super::Batcher`]);
    /// - [`crate::error::FormatError::GpuReported`] (first image with flags) for corrupt streams;
    /// - [`LimitsError::GpuBuffer`] if one image does not fit the device's buffer limits even
    ///   split into bands of patch rows (see the module documentation).
    pub fn decode_batch(&self, files: &[&[u8]], output: OutputLayout) -> Result<GpuBatch> {
        let (batch, flags) = self.decode_batch_with_flags(files, output)?;
        check_flags(&flags)?;
        Ok(batch)
    }

    /// Like [`GpuDecoder::decode_batch`], but a corrupt stream does not fail the batch: returns
    /// the batch and each image's error flags ([`super::flags`]; 0 = decoded correctly). The
    /// output of a flagged image is unspecified. CPU-side errors (headers, size tables,
    /// checksum, limits) still fail the whole batch, naming the first bad file's index (as
    /// for [`GpuDecoder::decode_batch`]).
    pub fn decode_batch_with_flags(
        &self,
        files: &[&[u8]],
        output: OutputLayout,
    ) -> Result<(GpuBatch, Vec<u32>)> {
        let r = self.decode_blocking(files, output, self.timing, &[])?;
        Ok((r.batch, r.flags))
    }

    /// Like [`GpuDecoder::decode_batch`], but image `i` is decoded only where `windows[i]`
    /// (if given) needs it: only the patches that hold pixels of the window are uploaded and
    /// decoded (whole), and the rest of the image's output is zero. What a random crop needs
    /// (see [`crate::decode::decode_layout_window`], the CPU equivalent, which gives the
    /// same window and also skips the patches' rows below it). `windows` may be shorter than
    /// `files` (the rest decode whole). An image too large for one binding (split into bands
    /// of patch rows) is decoded whole.
    pub fn decode_batch_windows(
        &self,
        files: &[&[u8]],
        output: OutputLayout,
        windows: &[Option<Window>],
    ) -> Result<GpuBatch> {
        let r = self.decode_blocking(files, output, self.timing, windows)?;
        check_flags(&r.flags)?;
        Ok(r.batch)
    }

    /// Async form of [`GpuDecoder::decode_batch`]: validates and submits at once, then returns
    /// a future that resolves when the GPU is done, without busy polling.
    ///
    /// Native wgpu (30) completes buffer maps only inside `Device::poll`, so something must
    /// poll the device: after submitting, the decoder starts one helper thread that blocks in
    /// `device.poll(PollType::wait_indefinitely())` (asleep in the driver until the GPU is
    /// done) and then runs the map callbacks, which complete the `futures-intrusive` oneshot
    /// channels the future awaits and wake its task. The future works under any executor
    /// (e.g. `pollster::block_on`); a caller that polls the device itself loses nothing.
    pub fn decode_batch_async(
        &self,
        files: &[&[u8]],
        output: OutputLayout,
    ) -> impl std::future::Future<Output = Result<GpuBatch>> + '_ {
        let pending = self.submit(files, output, self.timing, &[]);
        async move {
            let r = pending?.finish(Poller::Thread).await?;
            self.record_timings(r.timings);
            check_flags(&r.flags)?;
            Ok(r.batch)
        }
    }

    /// Runs only the prefix-sum kernel on `sizes` (blocking) and returns the exclusive
    /// prefix sums: for testing the shader against its CPU twin.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn prefix_sum(&self, sizes: &[u32]) -> Result<Vec<u32>> {
        if sizes.is_empty() {
            return Ok(Vec::new());
        }
        let (levels, scan_words) = scan_levels(sizes.len() as u32);
        let needs = Needs {
            scan: scan_words * 4,
            params: levels.len() as u64 * self.uniform_align,
            ..Default::default()
        };
        if needs.scan > self.chunk_limit {
            return Err(LimitsError::GpuBuffer {
                what: "prefix-sum buffer",
                needed: needs.scan,
                max: self.chunk_limit,
            }
            .into());
        }
        let mut guard = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let scratch = self.ensure_scratch(&mut guard, needs);
        self.upload(&scratch.scan, 0, bytemuck::cast_slice(sizes));
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        self.encode_scan(&mut encoder, scratch, &levels, 0, None);
        // The guard is held until the result is read back: the writes above take effect at
        // the next submission on the queue, so another batch on this decoder must not write
        // the scratch buffers before this scan is submitted, nor before the read-back's copy
        // of `scratch.scan` (a later submission) has been made.
        self.submit_commands(encoder.finish());
        let bytes = self.read_back(&scratch.scan, 0, sizes.len() as u64 * 4);
        drop(guard);
        Ok(bytemuck::pod_collect_to_vec(&bytes?))
    }
}

/// The engine's counted work ([`Counts`]): every submission, dispatch, bind group, buffer,
/// read-back and upload of the decode and float paths goes through these.
impl Context {
    /// What this context has asked of its device so far ([`Counts`]).
    pub fn counts(&self) -> Counts {
        self.counters.snapshot()
    }

    /// Submits `commands` to the queue, counted.
    pub(crate) fn submit_commands(&self, commands: wgpu::CommandBuffer) -> wgpu::SubmissionIndex {
        Counters::add(&self.counters.submissions, 1);
        self.queue.submit([commands])
    }

    /// `queue.write_buffer`, counted.
    pub(crate) fn upload(&self, buffer: &wgpu::Buffer, offset: u64, data: &[u8]) {
        Counters::add(&self.counters.upload_bytes, data.len() as u64);
        self.queue.write_buffer(buffer, offset, data);
    }

    /// A bind group, counted.
    pub(crate) fn bind_group(&self, desc: &wgpu::BindGroupDescriptor<'_>) -> wgpu::BindGroup {
        Counters::add(&self.counters.bind_groups, 1);
        self.device.create_bind_group(desc)
    }

    /// `size` bytes at `offset` of `buffer`, read back through a new staging buffer
    /// (blocking), counted: a buffer, a submission, a read-back.
    pub(crate) fn read_back(
        &self,
        buffer: &wgpu::Buffer,
        offset: u64,
        size: u64,
    ) -> crate::error::Result<Vec<u8>> {
        self.count_buffers(1);
        self.count_readbacks(1);
        Counters::add(&self.counters.submissions, 1);
        super::readback::read_buffer(&self.device, &self.queue, buffer, offset, size)
    }

    /// Counts `n` compute dispatches recorded.
    pub(crate) fn count_dispatches(&self, n: u64) {
        Counters::add(&self.counters.dispatches, n);
    }

    /// Counts `n` GPU buffers created.
    pub(crate) fn count_buffers(&self, n: u64) {
        Counters::add(&self.counters.buffers, n);
    }

    /// Counts `n` copies into host-mapped buffers.
    pub(crate) fn count_readbacks(&self, n: u64) {
        Counters::add(&self.counters.readbacks, n);
    }
}
