//! Object stores (feature `remote`) through the `object_store` crate: S3 and compatibles
//! (`s3://bucket/prefix`), Google Cloud Storage (`gs://`), Azure (`az://`, `abfs(s)://`) and
//! plain HTTP(S) servers. Credentials, region and endpoint come from the standard environment
//! variables (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL`,
//! `AWS_SKIP_SIGNATURE=true` for public buckets, `GOOGLE_*`, `AZURE_*`); an `http://`
//! endpoint is allowed when the endpoint variable names one. l3's own knobs are
//! [`RemoteOptions`].
//!
//! Calls are blocking: each runs on one small tokio runtime per process (2 threads), shared by
//! every store and made anew in a forked child (a `DataLoader` worker), as is each store's
//! HTTP client, whose connections belong to the runtime that opened them.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{
    BackoffConfig, ClientOptions, GetOptions, GetRange, GetResult, ObjectStore, ObjectStoreExt,
    PutPayload, RetryConfig, WriteMultipart,
};

use super::index_cache::{self, Opened, MAX_KEPT};
use super::{Blob, BlobHint, BlobInner, TAIL_BYTES};
use crate::error::{LimitsError, ParameterError, Result};

/// Objects above this size are uploaded in parts.
const MULTIPART_ABOVE: u64 = 64 << 20;
/// Bytes of one part of a multipart upload.
const PART_BYTES: usize = 16 << 20;

/// How l3 talks to object stores. Defaults, each overridable by an environment variable:
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteOptions {
    /// Retries of a failed request (5xx, timeouts, dropped connections) before the error is
    /// returned (default 4; `L3_REMOTE_RETRIES`).
    pub max_retries: usize,
    /// Longest time spent retrying one request (default 30 s; `L3_REMOTE_RETRY_TIMEOUT`,
    /// seconds).
    pub retry_timeout: Duration,
    /// Timeout of one request (default 60 s; `L3_REMOTE_TIMEOUT`, seconds).
    pub request_timeout: Duration,
    /// Timeout of connecting (default 5 s; `L3_REMOTE_CONNECT_TIMEOUT`, seconds).
    pub connect_timeout: Duration,
    /// Requests in flight per process at most (default 32; `L3_REMOTE_IN_FLIGHT`).
    pub max_in_flight: usize,
    /// The index cache: a local folder where opening a shard keeps what it fetched (size,
    /// ETag, header, index), shared by every process that names it, so the next opening of
    /// the same shard asks the server nothing (default none; `L3_INDEX_CACHE`, a folder).
    /// Entries are small (a shard's index) and keyed by the manifest's size and CRC-32 of the
    /// shard: a repacked dataset misses. The Python `Loader` and `L3IterableDataset` make one
    /// for their workers when none is set.
    pub index_cache: Option<PathBuf>,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            max_retries: 4,
            retry_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(5),
            max_in_flight: 32,
            index_cache: None,
        }
    }
}

impl RemoteOptions {
    /// The defaults, with the environment's overrides (see the fields).
    pub fn from_env() -> Result<Self> {
        let mut o = RemoteOptions::default();
        let var = |name: &'static str| -> Result<Option<u64>> {
            match std::env::var(name) {
                Ok(v) => v.trim().parse::<u64>().map(Some).map_err(|_| {
                    ParameterError::Location {
                        location: format!("{name}={v}"),
                        reason: "not a whole number".into(),
                    }
                    .into()
                }),
                Err(_) => Ok(None),
            }
        };
        if let Some(v) = var("L3_REMOTE_RETRIES")? {
            o.max_retries = v as usize;
        }
        if let Some(v) = var("L3_REMOTE_RETRY_TIMEOUT")? {
            o.retry_timeout = Duration::from_secs(v);
        }
        if let Some(v) = var("L3_REMOTE_TIMEOUT")? {
            o.request_timeout = Duration::from_secs(v.max(1));
        }
        if let Some(v) = var("L3_REMOTE_CONNECT_TIMEOUT")? {
            o.connect_timeout = Duration::from_secs(v.max(1));
        }
        if let Some(v) = var("L3_REMOTE_IN_FLIGHT")? {
            o.max_in_flight = (v as usize).max(1);
        }
        if let Some(dir) = std::env::var_os("L3_INDEX_CACHE").filter(|d| !d.is_empty()) {
            o.index_cache = Some(PathBuf::from(dir));
        }
        Ok(o)
    }
}

/// The client of this process: `(pid, client)`.
type PerProcess = (u32, Arc<dyn ObjectStore>);

/// This process's runtime, shared by every remote store (made anew in a forked child).
fn runtime() -> Result<Arc<tokio::runtime::Runtime>> {
    static RUNTIME: Mutex<Option<(u32, Arc<tokio::runtime::Runtime>)>> = Mutex::new(None);
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((p, rt)) = &*slot {
        if *p == pid {
            return Ok(rt.clone());
        }
    }
    if let Some(old) = slot.take() {
        // A forked child: see `Remote::client`.
        std::mem::forget(old);
    }
    let rt = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("l3-remote")
            .enable_all()
            .build()?,
    );
    *slot = Some((pid, rt.clone()));
    Ok(rt)
}

/// A prefix of an object store.
#[derive(Debug)]
pub(super) struct Remote {
    /// The URL without a trailing `/`.
    url: String,
    /// The prefix inside the bucket.
    prefix: ObjectPath,
    options: RemoteOptions,
    /// Made on first use in each process (see the module docs).
    client: Mutex<Option<PerProcess>>,
    /// Bounds the requests in flight.
    slots: Arc<tokio::sync::Semaphore>,
    /// Read requests made and bytes they fetched.
    requests: AtomicU64,
    fetched: AtomicU64,
    /// Blobs opened from the index cache.
    cache_hits: AtomicU64,
}

fn location_error(url: &str, reason: impl std::fmt::Display) -> crate::Error {
    ParameterError::Location {
        location: url.to_owned(),
        reason: reason.to_string(),
    }
    .into()
}

/// An `object_store` error as an I/O error naming `object`.
fn io_error(object: &str, e: object_store::Error) -> std::io::Error {
    use std::io::ErrorKind;
    match e {
        object_store::Error::NotFound { .. } => {
            std::io::Error::new(ErrorKind::NotFound, format!("{object}: no such object"))
        }
        object_store::Error::Precondition { .. } => std::io::Error::other(format!(
            "{object}: the object changed after it was opened (its ETag no longer matches): \
                 refusing to mix two versions; open the dataset again"
        )),
        e => std::io::Error::other(format!("{object}: {e}")),
    }
}

/// The body of `r`, which must be exactly `want` bytes (the caller has bounded `want`): a
/// response announcing another length is refused before its body is read, and one whose body
/// runs past `want` is stopped there, so a hostile server cannot make l3 allocate more.
async fn body_exact(r: GetResult, want: u64, object: &str) -> std::io::Result<Vec<u8>> {
    let announced = r.range.end.saturating_sub(r.range.start);
    if announced != want {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{object}: the server announced {announced} bytes where {want} were asked for"),
        ));
    }
    let mut out = Vec::with_capacity(want as usize);
    let mut body = r.into_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| io_error(object, e))?;
        if (out.len() + chunk.len()) as u64 > want {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{object}: the server sent more than the {want} bytes it announced"),
            ));
        }
        out.extend_from_slice(&chunk);
    }
    if out.len() as u64 != want {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("{object}: the server sent {} of {want} bytes", out.len()),
        ));
    }
    Ok(out)
}

/// A suffix read answered with another range.
fn range_refused(object: &str, want: u64, start: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("{object}: asked for its last {want} bytes, the server sent a range from {start}"),
    )
}

impl Remote {
    /// Checks `url` and builds its client once, so a bad URL or missing credentials fail here.
    pub(super) fn open(url: &str, options: &RemoteOptions) -> Result<Remote> {
        let trimmed = url.trim_end_matches('/');
        let parsed = url::Url::parse(trimmed).map_err(|e| location_error(url, e))?;
        // The prefix only: building a store here would miss the environment's settings.
        let (_, prefix) =
            object_store::ObjectStoreScheme::parse(&parsed).map_err(|e| location_error(url, e))?;
        let remote = Remote {
            url: trimmed.to_owned(),
            prefix,
            options: options.clone(),
            client: Mutex::new(None),
            slots: Arc::new(tokio::sync::Semaphore::new(options.max_in_flight)),
            requests: AtomicU64::new(0),
            fetched: AtomicU64::new(0),
            cache_hits: AtomicU64::new(0),
        };
        remote.client()?;
        Ok(remote)
    }

    /// Read requests made so far and the bytes they fetched.
    pub(super) fn traffic(&self) -> (u64, u64) {
        (
            self.requests.load(Ordering::Relaxed),
            self.fetched.load(Ordering::Relaxed),
        )
    }

    /// Blobs opened from the index cache so far.
    pub(super) fn cache_hits(&self) -> u64 {
        self.cache_hits.load(Ordering::Relaxed)
    }

    fn count(&self, bytes: usize) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.fetched.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// The URL (no trailing `/`).
    pub(super) fn url(&self) -> &str {
        &self.url
    }

    /// The URL of object `name`.
    pub(super) fn describe(&self, name: &str) -> String {
        format!("{}/{name}", self.url)
    }

    fn path(&self, name: &str) -> ObjectPath {
        self.prefix.clone().join(name)
    }

    /// This process's runtime and client (made anew after a fork).
    fn client(&self) -> Result<Arc<dyn ObjectStore>> {
        let pid = std::process::id();
        let mut slot = self.client.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((p, c)) = &*slot {
            if *p == pid {
                return Ok(c.clone());
            }
        }
        if let Some(old) = slot.take() {
            // The parent's client belongs to a runtime with no threads in this process:
            // dropping it could wait on those threads forever.
            std::mem::forget(old);
        }
        let client = self.build()?;
        *slot = Some((pid, client.clone()));
        Ok(client)
    }

    fn build(&self) -> Result<Arc<dyn ObjectStore>> {
        let url = &self.url;
        let o = &self.options;
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(5),
                base: 2.0,
            },
            max_retries: o.max_retries,
            retry_timeout: o.retry_timeout,
        };
        let client = ClientOptions::new()
            .with_timeout(o.request_timeout)
            .with_connect_timeout(o.connect_timeout);
        let scheme = url
            .split_once("://")
            .map_or("", |(s, _)| s)
            .to_ascii_lowercase();
        let http_endpoint = |vars: &[&str]| {
            vars.iter()
                .any(|v| std::env::var(v).is_ok_and(|e| e.starts_with("http://")))
        };
        let store: Arc<dyn ObjectStore> = match scheme.as_str() {
            "s3" | "s3a" => {
                let allow =
                    http_endpoint(&["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT"]);
                Arc::new(
                    object_store::aws::AmazonS3Builder::from_env()
                        .with_url(url.as_str())
                        .with_retry(retry)
                        .with_client_options(client.with_allow_http(allow))
                        .build()
                        .map_err(|e| location_error(url, e))?,
                )
            }
            "gs" => Arc::new(
                object_store::gcp::GoogleCloudStorageBuilder::from_env()
                    .with_url(url.as_str())
                    .with_retry(retry)
                    .with_client_options(client)
                    .build()
                    .map_err(|e| location_error(url, e))?,
            ),
            "az" | "abfs" | "abfss" => {
                let allow = http_endpoint(&["AZURE_STORAGE_ENDPOINT", "AZURE_ENDPOINT"]);
                Arc::new(
                    object_store::azure::MicrosoftAzureBuilder::from_env()
                        .with_url(url.as_str())
                        .with_retry(retry)
                        .with_client_options(client.with_allow_http(allow))
                        .build()
                        .map_err(|e| location_error(url, e))?,
                )
            }
            "http" | "https" => {
                let parsed = url::Url::parse(url).map_err(|e| location_error(url, e))?;
                let base = format!(
                    "{}://{}",
                    parsed.scheme(),
                    &parsed[url::Position::BeforeHost..url::Position::AfterPort]
                );
                Arc::new(
                    object_store::http::HttpBuilder::new()
                        .with_url(base)
                        .with_retry(retry)
                        .with_client_options(client.with_allow_http(scheme == "http"))
                        .build()
                        .map_err(|e| location_error(url, e))?,
                )
            }
            other => return Err(location_error(url, format!("unknown scheme {other:?}"))),
        };
        Ok(store)
    }

    /// Runs `f` (one request) on this process's runtime, within the in-flight bound.
    fn call<T, F, Fut>(&self, f: F) -> Result<T>
    where
        F: FnOnce(Arc<dyn ObjectStore>) -> Fut,
        Fut: std::future::Future<Output = std::io::Result<T>>,
    {
        self.call_n(1, f)
    }

    /// Runs `f` (`n` concurrent requests) on this process's runtime, holding `n` of the
    /// in-flight slots.
    fn call_n<T, F, Fut>(&self, n: u32, f: F) -> Result<T>
    where
        F: FnOnce(Arc<dyn ObjectStore>) -> Fut,
        Fut: std::future::Future<Output = std::io::Result<T>>,
    {
        let client = self.client()?;
        let slots = self.slots.clone();
        let n = n.min(self.options.max_in_flight as u32).max(1);
        Ok(runtime()?.block_on(async move {
            let _permit = slots
                .acquire_many_owned(n)
                .await
                .expect("the semaphore is never closed");
            f(client).await
        })?)
    }

    /// The whole of object `name`, at most `max` bytes (checked on the response's size before
    /// the body is read).
    pub(super) fn read(&self, name: &str, max: u64) -> Result<Vec<u8>> {
        let object = self.describe(name);
        let path = self.path(name);
        let got = self.call(|c| async move {
            let r = c.get(&path).await.map_err(|e| io_error(&object, e))?;
            if r.meta.size > max {
                return Ok(Err(r.meta.size));
            }
            let size = r.meta.size;
            Ok(Ok(body_exact(r, size, &object).await?))
        })?;
        let bytes = got.map_err(|len| LimitsError::InputBytes { len, max })?;
        self.count(bytes.len());
        Ok(bytes)
    }

    /// Whether object `name` exists.
    pub(super) fn exists(&self, name: &str) -> Result<bool> {
        let object = self.describe(name);
        let path = self.path(name);
        self.call(|c| async move {
            match c.head(&path).await {
                Ok(_) => Ok(true),
                Err(object_store::Error::NotFound { .. }) => Ok(false),
                Err(e) => Err(io_error(&object, e)),
            }
        })
    }

    /// Opens object `name`: one ranged read of its last [`TAIL_BYTES`], which gives its size
    /// and ETag.
    pub(super) fn open_blob(self: &Arc<Remote>, name: &str) -> Result<Blob> {
        let object = self.describe(name);
        let path = self.path(name);
        let obj = object.clone();
        let p = path.clone();
        let (len, etag, tail_start, tail, asked) = self.call(|c| async move {
            let suffix = c
                .get_opts(
                    &p,
                    GetOptions {
                        range: Some(GetRange::Suffix(TAIL_BYTES)),
                        ..Default::default()
                    },
                )
                .await;
            let (r, asked) = match suffix {
                Ok(r) => (r, 1),
                // Azure's API has no suffix ranges: the size first, then a bounded read
                // pinned to the ETag the size came with.
                Err(object_store::Error::NotSupported { .. }) => {
                    let meta = c.head(&p).await.map_err(|e| io_error(&obj, e))?;
                    let want = meta.size.min(TAIL_BYTES);
                    if want == 0 {
                        return Ok((0, meta.e_tag, 0, Vec::new(), 1));
                    }
                    let r = c
                        .get_opts(
                            &p,
                            GetOptions {
                                range: Some(GetRange::Bounded(meta.size - want..meta.size)),
                                if_match: meta.e_tag.clone(),
                                ..Default::default()
                            },
                        )
                        .await
                        .map_err(|e| io_error(&obj, e))?;
                    (r, 2)
                }
                Err(e) => return Err(io_error(&obj, e)),
            };
            let (len, etag) = (r.meta.size, r.meta.e_tag.clone());
            // The last TAIL_BYTES, or the whole object when it is smaller.
            let want = len.min(TAIL_BYTES);
            if r.range.start != len - want {
                return Err(range_refused(&obj, want, r.range.start));
            }
            let bytes = body_exact(r, want, &obj).await?;
            Ok((len, etag, len - want, bytes, asked))
        })?;
        if asked == 2 {
            self.count(0); // the size
        }
        self.count(tail.len());
        Ok(self.blob(
            object,
            path,
            Opened {
                len,
                etag,
                head: Vec::new(),
                tail_start,
                tail,
            },
        ))
    }

    fn blob(self: &Arc<Remote>, object: String, path: ObjectPath, o: Opened) -> Blob {
        Blob {
            len: o.len,
            inner: BlobInner::Remote(RemoteBlob {
                remote: self.clone(),
                object,
                path,
                etag: o.etag,
                head: o.head,
                tail_start: o.tail_start,
                tail: o.tail,
            }),
        }
    }

    /// Opens object `name`, which the dataset's manifest describes as `hint`: from the index
    /// cache when it holds it (no request), else with two concurrent ranged reads (its first
    /// `hint.head` and last `hint.tail` bytes, one read when they meet), kept in the cache.
    pub(super) fn open_blob_hinted(
        self: &Arc<Remote>,
        name: &str,
        hint: &BlobHint,
    ) -> Result<Blob> {
        let object = self.describe(name);
        let path = self.path(name);
        let cache = self.options.index_cache.as_deref();
        let cached = |dir: &Path| index_cache::load(dir, &object, hint.len, hint.crc32);
        if let Some(o) = cache.and_then(&cached) {
            self.cache_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(self.blob(object, path, o));
        }
        // Of the processes opening this object now, one fetches while the others wait, then
        // find it cached (no request storm when a loader's workers start together).
        let _lock = cache.and_then(|d| index_cache::lock(d, &object, hint.len, hint.crc32));
        if let Some(o) = cache.and_then(&cached) {
            self.cache_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(self.blob(object, path, o));
        }
        if hint.head.saturating_add(hint.tail) > MAX_KEPT || hint.len == 0 {
            // An index too large to keep (or a hint not worth trusting): the plain opening.
            return self.open_blob(name);
        }
        let (head_len, tail_len) = (hint.head, hint.tail.max(1));
        let whole = head_len.saturating_add(tail_len) >= hint.len;
        // (head_len + tail_len < hint.len below: both ranges lie inside the object.)
        let obj = object.clone();
        let p = path.clone();
        let opened = self.call_n(if whole { 1 } else { 2 }, |c| async move {
            let get = |range: GetRange| {
                let (c, p) = (c.clone(), p.clone());
                async move {
                    c.get_opts(
                        &p,
                        GetOptions {
                            range: Some(range),
                            ..Default::default()
                        },
                    )
                    .await
                }
            };
            if whole {
                // Small enough to read whole.
                let r = get(GetRange::Bounded(0..hint.len)).await;
                let r = match r {
                    Ok(r) if r.meta.size == hint.len => r,
                    // Another size than the manifest's: the plain opening (below).
                    Ok(_) => return Ok(None),
                    Err(e @ object_store::Error::NotFound { .. }) => return Err(io_error(&obj, e)),
                    Err(_) => return Ok(None),
                };
                let etag = r.meta.e_tag.clone();
                let tail = body_exact(r, hint.len, &obj).await?;
                return Ok(Some(Opened {
                    len: hint.len,
                    etag,
                    head: Vec::new(),
                    tail_start: 0,
                    tail,
                }));
            }
            // Bounded ranges from the manifest's size (Azure has no suffix ranges).
            let len = hint.len;
            let (t, h) = futures_util::join!(
                get(GetRange::Bounded(len - tail_len..len)),
                get(GetRange::Bounded(0..head_len))
            );
            let (t, h) = match (t, h) {
                (Ok(t), Ok(h)) if t.meta.size == len => (t, h),
                (Err(e @ object_store::Error::NotFound { .. }), _) => {
                    return Err(io_error(&obj, e))
                }
                // Another size (a range past the end, or a stale manifest): the plain opening.
                _ => return Ok(None),
            };
            let etag = t.meta.e_tag.clone();
            if h.meta.e_tag != etag || h.meta.size != len {
                return Err(std::io::Error::other(format!(
                    "{obj}: the object changed while it was opened (two reads saw two versions)"
                )));
            }
            let head = body_exact(h, head_len, &obj).await?;
            let tail = body_exact(t, tail_len, &obj).await?;
            Ok(Some(Opened {
                len,
                etag,
                head,
                tail_start: len - tail_len,
                tail,
            }))
        })?;
        let Some(opened) = opened else {
            return self.open_blob(name);
        };
        if !whole {
            self.count(opened.head.len());
        }
        self.count(opened.tail.len());
        if let Some(dir) = cache {
            // Only what matches the manifest is kept (a mismatch is reported by the reader).
            if opened.len == hint.len {
                index_cache::save(dir, &object, hint.crc32, &opened);
            }
        }
        Ok(self.blob(object, path, opened))
    }

    /// Uploads `bytes` as object `name`.
    pub(super) fn put(&self, name: &str, bytes: Vec<u8>) -> Result<()> {
        let object = self.describe(name);
        let path = self.path(name);
        self.call(|c| async move {
            c.put(&path, PutPayload::from(bytes))
                .await
                .map(|_| ())
                .map_err(|e| io_error(&object, e))
        })
    }

    /// Uploads the local file `from` as object `name`, in parts above [`MULTIPART_ABOVE`].
    pub(super) fn put_file(&self, name: &str, from: &Path) -> Result<()> {
        let len = std::fs::metadata(from)?.len();
        if len <= MULTIPART_ABOVE {
            return self.put(name, std::fs::read(from)?);
        }
        let object = self.describe(name);
        let path = self.path(name);
        let from = from.to_path_buf();
        self.call(|c| async move {
            use std::io::Read;
            let upload = c
                .put_multipart(&path)
                .await
                .map_err(|e| io_error(&object, e))?;
            let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
            let mut file = std::fs::File::open(&from)?;
            let mut buf = vec![0u8; PART_BYTES];
            loop {
                let n = file.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                writer
                    .wait_for_capacity(4)
                    .await
                    .map_err(|e| io_error(&object, e))?;
                writer.write(&buf[..n]);
            }
            writer
                .finish()
                .await
                .map(|_| ())
                .map_err(|e| io_error(&object, e))
        })
    }
}

/// An object opened for ranged reads, pinned to its ETag.
#[derive(Debug)]
pub(super) struct RemoteBlob {
    remote: Arc<Remote>,
    /// Its URL, for errors.
    object: String,
    path: ObjectPath,
    etag: Option<String>,
    /// The kept head (the object's first bytes), the kept tail's start and bytes.
    head: Vec<u8>,
    tail_start: u64,
    tail: Vec<u8>,
}

impl RemoteBlob {
    /// `len` bytes at `offset`: from the kept tail, or one ranged GET naming the ETag.
    pub(super) fn read_at(&self, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
        let end = offset + len as u64;
        if offset >= self.tail_start && end <= self.tail_start + self.tail.len() as u64 {
            let at = (offset - self.tail_start) as usize;
            return Ok(self.tail[at..at + len].to_vec());
        }
        if end <= self.head.len() as u64 {
            return Ok(self.head[offset as usize..end as usize].to_vec());
        }
        let object = self.object.clone();
        let path = self.path.clone();
        let etag = self.etag.clone();
        let range: Range<u64> = offset..end;
        let got = self.remote.call(|c| async move {
            let r = c
                .get_opts(
                    &path,
                    GetOptions {
                        range: Some(GetRange::Bounded(range)),
                        if_match: etag,
                        ..Default::default()
                    },
                )
                .await
                .map_err(|e| io_error(&object, e))?;
            body_exact(r, len as u64, &object).await
        });
        if let Ok(b) = &got {
            self.remote.count(b.len());
        }
        // body_exact gave exactly `len` bytes.
        got.map_err(|e| match e {
            crate::Error::Io(e) => e,
            e => std::io::Error::other(e.to_string()),
        })
    }
}
