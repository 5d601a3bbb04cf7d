//! Group commit: the one write connection, on a thread of its own, commits
//! every write queued meanwhile in one transaction with one fsync.
//!
//! SQLite has one writer, and with `synchronous=FULL` each commit waits for
//! an fsync of the WAL (milliseconds on most disks). Committing writes one by
//! one caps a server at a few hundred writes a second however many clients
//! it has. Here the writer thread takes the first queued job, then every job
//! already waiting (at most [`MAX_BATCH`]), and runs them in one
//! `BEGIN IMMEDIATE … COMMIT`:
//!
//! - each job runs inside a savepoint of its own, so a job that fails (a
//!   constraint, a domain check, a panic) is rolled back alone and fails
//!   only its own request; the others commit;
//! - a job's result is delivered only after the batch's `COMMIT` returned,
//!   so a request is answered only once its write is durable; when the
//!   commit fails, every job of the batch gets that error and none of their
//!   writes is kept;
//! - jobs run in the order they were queued, so a later job sees an earlier
//!   one's writes (a client that waits for each answer sees its writes
//!   applied in its order in any case);
//! - the count generation is bumped right after the commit, before anyone
//!   hears of it, so no cached count outlives a write a caller has seen.
//!
//! A job that opens a transaction of its own uses `Connection::savepoint`
//! (a nested savepoint here), never `BEGIN`.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};
use ward_core::{Error, Result};

/// Jobs committed together at most: bounds the work one commit can lose to
/// a failed fsync and the wait of the batch's first job.
pub(super) const MAX_BATCH: usize = 256;

/// Jobs waiting at most; a writer further behind makes callers wait to queue.
const QUEUE: usize = 4096;

/// How long a caller waits for room in the queue before it is told to retry.
const QUEUE_WAIT: Duration = Duration::from_secs(30);

/// What a job tells the writer once it has run: whether its savepoint is kept,
/// and how to answer its caller once the batch's fate is known.
struct Ran {
    ok: bool,
    answer: Answer,
}

/// Answers a job's caller, given why its batch failed to commit (if it did).
type Answer = Box<dyn FnOnce(Option<&str>) + Send>;

type Job = Box<dyn FnOnce(&mut Connection) -> Ran + Send>;

/// The handle requests queue writes on. Dropping the last one stops the thread.
pub(super) struct Writer {
    jobs: mpsc::Sender<Job>,
    /// Batches committed (or failed) so far (read by the tests of batching).
    #[cfg_attr(not(test), allow(dead_code))]
    batches: Arc<AtomicU64>,
}

impl Writer {
    /// Starts the writer thread on `conn`; `generation` is bumped after every
    /// commit.
    pub(super) fn start(conn: Connection, generation: Arc<AtomicU64>) -> std::io::Result<Self> {
        let (jobs, queue) = mpsc::channel(QUEUE);
        let batches = Arc::new(AtomicU64::new(0));
        let counter = batches.clone();
        std::thread::Builder::new()
            .name("ward-sqlite-writer".into())
            .spawn(move || run(conn, queue, &generation, &counter))?;
        Ok(Self { jobs, batches })
    }

    /// Runs `f` in the next batch and answers once that batch is durable.
    pub(super) async fn write<T: Send + 'static>(
        &self,
        context: &'static str,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = oneshot::channel::<Result<T>>();
        let job: Job = Box::new(move |c| {
            let r = f(c);
            Ran {
                ok: r.is_ok(),
                answer: Box::new(move |failed_commit| {
                    let answer = match (r, failed_commit) {
                        (Err(e), _) => Err(failure(context, e)),
                        (Ok(_), Some(why)) => Err(failure(context, why)),
                        (Ok(v), None) => Ok(v),
                    };
                    let _ = tx.send(answer);
                }),
            }
        });
        let started = std::time::Instant::now();
        let span = crate::trace_span(
            || tracing::info_span!(target: ward_core::traceparent::SPANS, "store", db = "sqlite", kind = "write", op = context),
        );
        let run = async move {
            match tokio::time::timeout(QUEUE_WAIT, self.jobs.send(job)).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(failure(context, "the database writer has stopped")),
                Err(_) => return Err(Error::Unavailable("the database is busy; retry".into())),
            }
            // A dropped sender means the job panicked (and was rolled back).
            let r = rx
                .await
                .unwrap_or_else(|_| Err(failure(context, "the write failed unexpectedly")));
            // Queued, run and made durable: what the caller waited.
            crate::observe_query("sqlite", "write", context, started);
            r
        };
        tracing::Instrument::instrument(run, span).await
    }
}

fn failure(context: &str, e: impl std::fmt::Display) -> Error {
    Error::internal(format_args!("{context}: {e}"))
}

/// The writer thread: a batch at a time until every handle is gone.
fn run(mut conn: Connection, mut queue: mpsc::Receiver<Job>, generation: &AtomicU64, batches: &AtomicU64) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = queue.blocking_recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        metrics::histogram!("ward_sqlite_writer_batch_size").record(batch.len() as f64);
        metrics::gauge!("ward_sqlite_writer_queue_depth").set(queue.len() as f64);
        commit(&mut conn, batch.drain(..), generation, batches);
    }
}

/// Runs one batch in one transaction and answers each job.
fn commit(conn: &mut Connection, batch: impl Iterator<Item = Job>, generation: &AtomicU64, batches: &AtomicU64) {
    let mut ran: Vec<Ran> = Vec::with_capacity(MAX_BATCH);
    let mut failed: Option<String> = conn.execute_batch("BEGIN IMMEDIATE").err().map(|e| e.to_string());
    for job in batch {
        if failed.is_some() {
            // Dropping the job drops its answer channel: its caller gets an error.
            drop(job);
            continue;
        }
        if let Err(e) = conn.execute_batch("SAVEPOINT job") {
            failed = Some(e.to_string());
            continue;
        }
        match catch_unwind(AssertUnwindSafe(|| job(conn))) {
            Ok(r) if r.ok => {
                if let Err(e) = conn.execute_batch("RELEASE job") {
                    failed = Some(e.to_string());
                }
                ran.push(r);
            }
            outcome => {
                if let Err(e) = conn.execute_batch("ROLLBACK TO job; RELEASE job") {
                    failed = Some(e.to_string());
                }
                // A failed job is answered with its own error, whatever the batch's fate.
                if let Ok(r) = outcome {
                    (r.answer)(None);
                }
            }
        }
        // Some errors (a full disk, I/O) roll the whole transaction back.
        if failed.is_none() && conn.is_autocommit() {
            failed = Some("the transaction was rolled back by an earlier error".into());
        }
    }
    if failed.is_none()
        && let Err(e) = conn.execute_batch("COMMIT")
    {
        failed = Some(e.to_string());
    }
    if failed.is_some() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    generation.fetch_add(1, Ordering::SeqCst);
    batches.fetch_add(1, Ordering::SeqCst);
    for r in ran {
        (r.answer)(failed.as_deref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer on a fresh WAL database with a parent and a child table.
    fn writer() -> (tempfile::TempDir, Writer, Arc<AtomicU64>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let conn = Connection::open(dir.path().join("w.db")).expect("open");
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; \
             CREATE TABLE parents (id INTEGER PRIMARY KEY); \
             CREATE TABLE children (id INTEGER PRIMARY KEY, parent INTEGER NOT NULL REFERENCES parents(id));",
        )
        .expect("schema");
        let generation = Arc::new(AtomicU64::new(0));
        let w = Writer::start(conn, generation.clone()).expect("start");
        (dir, w, generation)
    }

    fn ids(dir: &tempfile::TempDir, table: &str) -> Vec<i64> {
        let c = Connection::open(dir.path().join("w.db")).expect("open");
        let mut st = c
            .prepare(&format!("SELECT id FROM {table} ORDER BY id"))
            .expect("prepare");
        st.query_map([], |r| r.get(0))
            .expect("query")
            .collect::<rusqlite::Result<_>>()
            .expect("rows")
    }

    /// Jobs waiting in the queue (not yet taken by the writer).
    fn queued(w: &Writer) -> usize {
        QUEUE - w.jobs.capacity()
    }

    /// Holds the writer in a job until `n` more jobs are queued behind it, so
    /// that those `n` are committed as one batch. Returns once the writer is
    /// running the hold job, with the task that ends when that job has.
    async fn hold_until_queued(w: &Arc<Writer>, n: usize) -> tokio::task::JoinHandle<()> {
        let (started, running) = oneshot::channel();
        let probe = w.clone();
        let w = w.clone();
        let task = tokio::spawn(async move {
            w.write("hold", move |_| {
                let _ = started.send(());
                let deadline = std::time::Instant::now() + Duration::from_secs(60);
                while queued(&probe) < n {
                    assert!(std::time::Instant::now() < deadline, "{n} jobs never queued");
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(())
            })
            .await
            .expect("hold");
        });
        running.await.expect("the hold job runs");
        task
    }

    /// Waits until `n` jobs are queued behind the hold job, or the hold's
    /// batch has committed (which it does only once `n` are queued: the
    /// writer may take them all before this task looks again).
    async fn until_queued(w: &Writer, n: usize, held: u64) {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while queued(w) < n && w.batches.load(Ordering::SeqCst) == held {
            assert!(std::time::Instant::now() < deadline, "{n} jobs never queued");
            tokio::task::yield_now().await;
        }
    }

    fn insert(table: &'static str, id: i64, parent: i64) -> impl FnOnce(&mut Connection) -> rusqlite::Result<()> {
        move |c| {
            if table == "parents" {
                c.execute("INSERT INTO parents (id) VALUES (?1)", [id]).map(drop)
            } else {
                c.execute("INSERT INTO children (id, parent) VALUES (?1, ?2)", [id, parent])
                    .map(drop)
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failing_job_fails_only_itself() {
        let (dir, w, _) = writer();
        let w = Arc::new(w);
        let before = w.batches.load(Ordering::SeqCst);
        let hold = hold_until_queued(&w, 5).await;
        let held = w.batches.load(Ordering::SeqCst);
        // Queued in this order behind the hold: the batch runs them in order.
        let mut tasks = Vec::new();
        for (i, job) in (0..5).enumerate() {
            let w2 = w.clone();
            tasks.push(tokio::spawn(async move {
                let w = w2;
                match job {
                    0 => w.write("ok", insert("parents", 1, 0)).await,
                    // A constraint failure (the same key twice) rolls back its own job only.
                    1 => w.write("duplicate", insert("parents", 1, 0)).await,
                    2 => {
                        w.write("bad sql", |c| c.execute("INSERT INTO nowhere VALUES (1)", []).map(drop))
                            .await
                    }
                    3 => {
                        w.write("panics", |c| {
                            c.execute("INSERT INTO parents (id) VALUES (3)", [])?;
                            panic!("a job that panics after writing")
                        })
                        .await
                    }
                    _ => w.write("ok", insert("parents", 4, 0)).await,
                }
                .map_err(|e| e.to_string())
            }));
            // Each is queued before the next is spawned.
            until_queued(&w, i + 1, held).await;
        }
        hold.await.expect("hold");
        let results: Vec<_> = futures_join(tasks).await;
        assert!(results[0].is_ok(), "{results:?}");
        assert!(results[1].as_ref().is_err_and(|e| e.contains("UNIQUE")), "{results:?}");
        assert!(results[2].as_ref().is_err_and(|e| e.contains("nowhere")), "{results:?}");
        assert!(
            results[3].as_ref().is_err_and(|e| e.contains("unexpectedly")),
            "{results:?}"
        );
        assert!(results[4].is_ok(), "{results:?}");
        assert_eq!(
            ids(&dir, "parents"),
            vec![1, 4],
            "the panicking job's write is rolled back"
        );
        // The hold's batch, then one batch for all five.
        assert_eq!(w.batches.load(Ordering::SeqCst) - before, 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dependent_writes_in_one_batch_see_each_other() {
        let (dir, w, generation) = writer();
        let w = Arc::new(w);
        let hold = hold_until_queued(&w, 2).await;
        let held = w.batches.load(Ordering::SeqCst);
        let (a, b) = (w.clone(), w.clone());
        let parent = tokio::spawn(async move { a.write("parent", insert("parents", 7, 0)).await });
        until_queued(&w, 1, held).await;
        let child = tokio::spawn(async move { b.write("child", insert("children", 70, 7)).await });
        hold.await.expect("hold");
        parent.await.expect("join").expect("parent");
        child.await.expect("join").expect("child");
        assert_eq!(ids(&dir, "children"), vec![70]);
        assert!(
            generation.load(Ordering::SeqCst) >= 2,
            "every commit bumps the generation"
        );
        // One client, one write after another: each sees the previous.
        w.write("parent", insert("parents", 8, 0)).await.expect("parent");
        w.write("child", insert("children", 80, 8)).await.expect("child");
        assert_eq!(ids(&dir, "children"), vec![70, 80]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_commit_fails_every_job_of_its_batch_and_keeps_none() {
        let (dir, w, _) = writer();
        let w = Arc::new(w);
        let hold = hold_until_queued(&w, 2).await;
        let held = w.batches.load(Ordering::SeqCst);
        let a = w.clone();
        let good = tokio::spawn(async move { a.write("good", insert("parents", 1, 0)).await });
        until_queued(&w, 1, held).await;
        // A deferred foreign key violation passes its own statement and fails
        // the COMMIT: the whole batch is lost, and both callers hear so.
        let b = w.clone();
        let bad = tokio::spawn(async move {
            b.write("deferred", |c| {
                c.execute_batch("PRAGMA defer_foreign_keys = ON")?;
                c.execute("INSERT INTO children (id, parent) VALUES (1, 999)", [])
                    .map(drop)
            })
            .await
        });
        hold.await.expect("hold");
        let good = good.await.expect("join");
        let bad = bad.await.expect("join");
        assert!(
            good.as_ref().is_err_and(|e| e.to_string().contains("FOREIGN KEY")),
            "{good:?}"
        );
        assert!(bad.is_err(), "{bad:?}");
        assert!(ids(&dir, "parents").is_empty() && ids(&dir, "children").is_empty());
        // The writer goes on.
        w.write("after", insert("parents", 2, 0)).await.expect("after");
        assert_eq!(ids(&dir, "parents"), vec![2]);
    }

    async fn futures_join<T>(tasks: Vec<tokio::task::JoinHandle<T>>) -> Vec<T> {
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.expect("join"));
        }
        out
    }
}
