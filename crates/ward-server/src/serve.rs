//! The accept loop: HTTP/1.1 and HTTP/2 (REST and gRPC) on one listener, with
//! the limits that keep slow or idle clients from holding the server.
//!
//! - **Connection cap**: at most [`Limits::max_connections`] connections are
//!   served at once; further clients wait in the kernel's accept queue.
//! - **Per-client cap**: at most [`Limits::max_connections_per_client`] of
//!   them from one client address; a connection beyond it is closed at once,
//!   so one client cannot hold every slot.
//! - **Header-read timeout**: an HTTP/1 client must send a request's whole
//!   header within [`Limits::header_read_timeout`] (slowloris), and a
//!   connection of either protocol must have started its first request by
//!   then (an HTTP/2 client that sends only its preface and settings is
//!   closed like a silent HTTP/1 one).
//! - **Body-read timeout**: a request's body must arrive within
//!   [`Limits::body_read_timeout`] of its head (no byte-a-second trickles);
//!   a registry upload (`/v2/…`, any size) gets that long plus the time its
//!   bytes take at [`MIN_UPLOAD_RATE`].
//! - **Idle timeout**: a connection is closed once it has had no request in
//!   progress for [`Limits::idle_timeout`] (HTTP/2 pings do not count), or
//!   once a response has been waiting that long for the client to read it.
//!   While the server is still working on a request, the connection is never
//!   idle.
//!
//! axum's own `serve` offers none of these, so the loop is written here on
//! hyper-util's connection builder.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// Connection limits (`ward server` flags; see the README).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_connections: usize,
    pub max_connections_per_client: usize,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub body_read_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 1024,
            max_connections_per_client: DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            body_read_timeout: Duration::from_secs(30),
        }
    }
}

/// Default for [`Limits::max_connections_per_client`]: a quarter of the
/// default connection cap.
pub const DEFAULT_MAX_CONNECTIONS_PER_CLIENT: usize = 256;

/// The address a request's connection comes from (a request extension).
#[derive(Clone, Copy, Debug)]
pub struct ClientAddr(pub std::net::IpAddr);

impl ClientAddr {
    /// What per-client caps count by: the address, or for IPv6 its /64 (one
    /// host usually holds a whole /64, so single addresses would not cap it).
    pub fn key(self) -> std::net::IpAddr {
        client_key(self.0)
    }
}

fn client_key(ip: std::net::IpAddr) -> std::net::IpAddr {
    match ip.to_canonical() {
        std::net::IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            std::net::IpAddr::V6(bits.into())
        }
        v4 => v4,
    }
}

/// Open connections per client address.
#[derive(Default)]
struct PerClient(std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>);

impl PerClient {
    /// Takes one of `ip`'s slots, or None when it holds `max` already.
    fn take(self: &Arc<Self>, ip: std::net::IpAddr, max: usize) -> Option<ClientSlot> {
        let mut m = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = m.entry(ip).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(ClientSlot(self.clone(), ip))
    }
}

/// One connection's slot of its client's; given back when dropped.
struct ClientSlot(Arc<PerClient>, std::net::IpAddr);

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut m = (self.0).0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = m.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.1);
            }
        }
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets in-flight
/// requests finish (at most 30 s) and returns.
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let permits = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    let per_client = Arc::new(PerClient::default());
    let graceful = GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // No server pings on HTTP/2: an idle connection is closed after the idle
    // timeout instead of being kept alive.
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    builder.http2().timer(TokioTimer::new()).max_concurrent_streams(256);
    let builder = Arc::new(builder);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: back off, never spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let client = peer.ip().to_canonical();
        let Some(slot) = per_client.take(client_key(client), limits.max_connections_per_client.max(1)) else {
            tracing::debug!(%client, "closing a connection over the per-client cap");
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (io, activity) = Tracked::new(stream);
        let app = app.clone();
        let service = TowerToHyperService::new(InFlight {
            inner: app.clone(),
            activity: activity.clone(),
            body_read_timeout: limits.body_read_timeout,
            client: ClientAddr(client),
        });
        let conn = builder
            .serve_connection_with_upgrades(TokioIo::new(io), service)
            .into_owned();
        let conn = graceful.watch(conn);
        let idle = limits.idle_timeout;
        let first_request = limits.header_read_timeout;
        tokio::spawn(async move {
            let _permit = permit;
            let _slot = slot;
            tokio::pin!(conn);
            let period = (idle.min(first_request) / 4).max(Duration::from_millis(50));
            let mut tick = tokio::time::interval(period);
            loop {
                tokio::select! {
                    _ = &mut conn => break,
                    _ = tick.tick() => {
                        if !activity.started_any() && activity.age() >= first_request {
                            tracing::debug!("closing a connection that sent no request in time");
                            break;
                        }
                        if activity.idle_for() >= idle {
                            tracing::debug!("closing an idle connection");
                            break;
                        }
                    }
                }
            }
        });
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(Duration::from_secs(30)) => {
            tracing::warn!("connections still open after 30 s; closing them");
        }
    }
    Ok(())
}

/// What a connection is doing: requests in progress, when the last one
/// started or finished, and when bytes last moved.
struct Activity {
    start: Instant,
    last_byte_ms: AtomicU64,
    last_request_ms: AtomicU64,
    in_flight: AtomicU64,
    /// Requests whose handler has not answered yet.
    handling: AtomicU64,
    /// Whether a request has ever started.
    started: std::sync::atomic::AtomicBool,
}

impl Activity {
    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn touch(&self) {
        self.last_byte_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// Whether any request has started on the connection.
    fn started_any(&self) -> bool {
        self.started.load(Ordering::SeqCst)
    }

    /// How long the connection has been open.
    fn age(&self) -> Duration {
        self.start.elapsed()
    }

    fn request_started(&self) {
        self.started.store(true, Ordering::SeqCst);
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.last_request_ms.store(self.now_ms(), Ordering::SeqCst);
    }

    fn request_finished(&self) {
        self.last_request_ms.store(self.now_ms(), Ordering::SeqCst);
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
    }

    /// How long the connection has been idle: never while a handler works;
    /// with no request in progress, since the last one ended; while a
    /// response is being sent, since bytes last moved.
    fn idle_for(&self) -> Duration {
        let now = self.now_ms();
        let since = |t: &AtomicU64| Duration::from_millis(now.saturating_sub(t.load(Ordering::SeqCst)));
        if self.handling.load(Ordering::SeqCst) > 0 {
            Duration::ZERO
        } else if self.in_flight.load(Ordering::SeqCst) == 0 {
            since(&self.last_request_ms)
        } else {
            since(&self.last_byte_ms)
        }
    }
}

/// Counts a request as in progress until its response body is done.
#[derive(Clone)]
struct InFlight {
    inner: axum::Router,
    activity: Arc<Activity>,
    body_read_timeout: Duration,
    client: ClientAddr,
}

impl<B> tower::Service<http::Request<B>> for InFlight
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let guard = RequestGuard::new(self.activity.clone());
        let handling = HandlingGuard::new(self.activity.clone());
        let timeout = self.body_read_timeout;
        // Registry uploads may be gigabytes: their deadline grows with what
        // arrives (at least MIN_UPLOAD_RATE on average after the first
        // timeout), so big uploads finish and trickles do not.
        let stall = req.uri().path().starts_with("/v2/");
        let mut req = req;
        req.extensions_mut().insert(self.client);
        let req = req.map(|body| {
            axum::body::Body::new(DeadlineBody {
                inner: axum::body::Body::new(body),
                deadline: tokio::time::Instant::now() + timeout,
                sleep: None,
                metered: stall,
            })
        });
        let fut = tower::ServiceExt::oneshot(self.inner.clone(), req);
        Box::pin(async move {
            let resp = fut.await?;
            drop(handling);
            Ok(resp.map(|body| {
                axum::body::Body::new(GuardedBody {
                    inner: body,
                    _guard: guard,
                })
            }))
        })
    }
}

/// Marks a request's handler done when dropped.
struct HandlingGuard(Arc<Activity>);

impl HandlingGuard {
    fn new(activity: Arc<Activity>) -> Self {
        activity.handling.fetch_add(1, Ordering::SeqCst);
        Self(activity)
    }
}

impl Drop for HandlingGuard {
    fn drop(&mut self) {
        self.0.handling.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The error a request body gives once its deadline has passed.
#[derive(Debug)]
pub struct BodyTimeout;

impl std::fmt::Display for BodyTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body did not arrive in time")
    }
}

impl std::error::Error for BodyTimeout {}

/// A request body that fails once its deadline passes. The timer is armed
/// only if the body is not already all there.
struct DeadlineBody {
    inner: axum::body::Body,
    deadline: tokio::time::Instant,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Whether each frame that arrives moves the deadline by its share of
    /// [`MIN_UPLOAD_RATE`].
    metered: bool,
}

/// The slowest average a registry upload may arrive at (bytes per second),
/// beyond its first `--body-read-timeout`.
pub const MIN_UPLOAD_RATE: f64 = 64.0 * 1024.0;

impl http_body::Body for DeadlineBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && self.metered
            && let Some(data) = frame.data_ref()
        {
            let extra = Duration::from_secs_f64(data.len() as f64 / MIN_UPLOAD_RATE);
            self.deadline += extra;
            let deadline = self.deadline;
            if let Some(sleep) = self.sleep.as_mut() {
                sleep.as_mut().reset(deadline);
            }
        }
        if polled.is_ready() {
            return polled;
        }
        let deadline = self.deadline;
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(axum::Error::new(BodyTimeout)))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Whether `e` (or what it wraps) is a [`BodyTimeout`].
pub fn is_body_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if err.is::<BodyTimeout>() {
            return true;
        }
        cur = err.source();
    }
    false
}

/// Marks a request finished when dropped.
struct RequestGuard(Arc<Activity>);

impl RequestGuard {
    fn new(activity: Arc<Activity>) -> Self {
        activity.request_started();
        Self(activity)
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}

/// A response body that holds its request's guard until it is done.
struct GuardedBody {
    inner: axum::body::Body,
    _guard: RequestGuard,
}

impl http_body::Body for GuardedBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A TCP stream that records when bytes last moved.
struct Tracked {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl Tracked {
    fn new(inner: TcpStream) -> (Self, Arc<Activity>) {
        let activity = Arc::new(Activity {
            start: Instant::now(),
            last_byte_ms: AtomicU64::new(0),
            last_request_ms: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            handling: AtomicU64::new(0),
            started: std::sync::atomic::AtomicBool::new(false),
        });
        (
            Self {
                inner,
                activity: activity.clone(),
            },
            activity,
        )
    }
}

impl AsyncRead for Tracked {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        r
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn activity() -> Activity {
        Activity {
            start: Instant::now() - Duration::from_secs(100),
            last_byte_ms: AtomicU64::new(0),
            last_request_ms: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            handling: AtomicU64::new(0),
            started: std::sync::atomic::AtomicBool::new(false),
        }
    }

    #[test]
    fn clients_are_keyed_by_address_and_ipv6_by_its_64() {
        let k = |s: &str| client_key(s.parse().unwrap()).to_string();
        assert_eq!(k("192.0.2.7"), "192.0.2.7");
        assert_eq!(k("::ffff:192.0.2.7"), "192.0.2.7");
        assert_eq!(k("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::");
        assert_eq!(k("2001:db8:1:2:ffff:ffff:ffff:ffff"), "2001:db8:1:2::");
        assert_ne!(k("2001:db8:1:3::1"), k("2001:db8:1:2::1"));
    }

    #[test]
    fn idleness() {
        // Nothing ever happened: idle since the connection opened.
        let a = activity();
        assert!(a.idle_for() >= Duration::from_secs(99));
        // A handler at work: never idle, however long no byte moved.
        a.request_started();
        a.handling.fetch_add(1, Ordering::SeqCst);
        a.last_byte_ms.store(0, Ordering::SeqCst);
        assert_eq!(a.idle_for(), Duration::ZERO);
        // Its response is waiting for the client to read it: idle since
        // bytes last moved.
        a.handling.fetch_sub(1, Ordering::SeqCst);
        assert!(a.idle_for() >= Duration::from_secs(99));
        a.touch();
        assert!(a.idle_for() < Duration::from_secs(1));
        // Done: idle since the request ended, pings or not.
        a.request_finished();
        assert!(a.idle_for() < Duration::from_secs(1));
    }
}
