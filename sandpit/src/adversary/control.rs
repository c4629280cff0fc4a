//! The control socket: where the sandboxed side asks the launcher's [`Reviewer`] and
//! blocks for the verdict. Protocol (one request per connection, one line each way):
//! see `sandpit_review` and docs/adversary.md.
//!
//! The socket lives in the run's own directory under sandpit's state directory
//! (`<state_dir>/run/<run id>/adversary.sock`): the directory is created 0700 before
//! the socket is bound, and the socket is made 0600. The state directory is read-only
//! to the sandbox, so nothing inside can replace the socket; clients refuse a socket
//! path outside it.
use super::{AdversaryError, ReviewRequest, Reviewer};
use sandpit_policy::{Decision, ReviewEvent};
use sandpit_review::{decode_request, encode_answer, Answer, MAX_REQUEST, SOCKET_VAR};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

pub use sandpit_review::SOCKET_VAR as ENV_VAR;

/// Time a client has to send its request line.
const REQUEST_WAIT: Duration = Duration::from_secs(5);
/// Connections served at once (each holds a task until its verdict is written).
const MAX_CONNECTIONS: usize = 256;

/// `<state_dir>/run/<run_id>/adversary.sock`.
pub fn socket_path(state_dir: &Path, run_id: &str) -> PathBuf {
    state_dir.join("run").join(run_id).join("adversary.sock")
}

/// A running control socket. Dropping it stops serving and removes the socket.
#[derive(Debug)]
pub struct ControlServer {
    path: PathBuf,
    task: JoinHandle<()>,
}

impl ControlServer {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The variable and value to put in the sandboxed command's environment.
    pub fn env(&self) -> (&'static str, &Path) {
        (SOCKET_VAR, &self.path)
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
        if let Some(dir) = self.path.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

fn sock_err(path: &Path) -> impl Fn(std::io::Error) -> AdversaryError + '_ {
    move |source| AdversaryError::Socket {
        path: path.to_path_buf(),
        source,
    }
}

/// Bind the socket at `path` (parent made 0700, a stale socket replaced, socket
/// 0600) and serve `reviewer` on it. Must be called inside a tokio runtime.
pub fn start(path: &Path, reviewer: Arc<Reviewer>) -> Result<ControlServer, AdversaryError> {
    let listener = bind(path)?;
    let task = tokio::spawn(serve(listener, reviewer));
    Ok(ControlServer {
        path: path.to_path_buf(),
        task,
    })
}

/// Everything a launcher needs for one run: build the reviewer from the policy and
/// the launcher's environment (`std::env::vars()`), bind its socket under the state
/// directory and serve it. `Ok(None)`: no `[adversary]` configured. Must be called
/// inside a tokio runtime. Put [`ControlServer::env`] into the child's environment
/// (and keep the API key variable out of it).
pub fn start_for_run(
    policy: &sandpit_policy::Policy,
    env: &[(String, String)],
    run_id: &str,
) -> Result<Option<(Arc<Reviewer>, ControlServer)>, AdversaryError> {
    let Some(reviewer) = Reviewer::from_policy(policy, env)? else {
        return Ok(None);
    };
    let reviewer = Arc::new(reviewer);
    let server = start(
        &socket_path(&policy.context.state_dir, run_id),
        reviewer.clone(),
    )?;
    Ok(Some((reviewer, server)))
}

/// Bind the control socket at `path` (inside a tokio runtime).
pub fn bind(path: &Path) -> Result<UnixListener, AdversaryError> {
    let err = sock_err(path);
    let l = bind_std(path)?;
    l.set_nonblocking(true).map_err(&err)?;
    UnixListener::from_std(l).map_err(&err)
}

/// Bind `path` as a std listener (parent made 0700, a stale socket replaced, socket
/// 0600): for a launcher that binds before it forks and serves after it.
pub fn bind_std(path: &Path) -> Result<std::os::unix::net::UnixListener, AdversaryError> {
    let err = sock_err(path);
    let dir = path
        .parent()
        .ok_or_else(|| err(std::io::ErrorKind::InvalidInput.into()))?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(&err)?;
    // The socket's own directory: no one else may reach it while its mode is set.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(&err)?;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_dir() => {
            return Err(err(std::io::ErrorKind::AlreadyExists.into()))
        }
        Ok(_) => std::fs::remove_file(path).map_err(&err)?,
        Err(_) => {}
    }
    let listener = std::os::unix::net::UnixListener::bind(path).map_err(&err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(&err)?;
    Ok(listener)
}

/// Answer every connection on `listener` until the task is dropped.
pub async fn serve(listener: UnixListener, reviewer: Arc<Reviewer>) {
    let conns = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = conns.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(_) => {
                // EMFILE and friends: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let r = reviewer.clone();
        tokio::spawn(async move {
            handle(stream, &r).await;
            drop(permit);
        });
    }
}

async fn read_request(stream: &mut UnixStream) -> Option<Vec<u8>> {
    let mut line = Vec::new();
    let mut reader = BufReader::new(stream).take(MAX_REQUEST as u64);
    let n = tokio::time::timeout(REQUEST_WAIT, reader.read_until(b'\n', &mut line))
        .await
        .ok()?
        .ok()?;
    (n > 0 && line.ends_with(b"\n")).then_some(line)
}

async fn handle(mut stream: UnixStream, reviewer: &Reviewer) {
    let answer = match read_request(&mut stream)
        .await
        .as_deref()
        .and_then(decode_request)
    {
        None => Answer::Deny("sandpit: the request to the adversary was malformed; not run".into()),
        Some(req) => {
            let argv: Vec<String> = req
                .argv
                .iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            let cwd = String::from_utf8_lossy(&req.cwd).into_owned();
            let req = match (req.event, argv.as_slice()) {
                (ReviewEvent::Write, [path]) => ReviewRequest::write(path.clone(), cwd),
                _ => ReviewRequest::exec(argv, cwd),
            };
            let v = reviewer.review(req).await;
            match v.decision {
                Decision::Allow => Answer::Allow(v.line()),
                Decision::Deny | Decision::Review => Answer::Deny(v.line()),
            }
        }
    };
    let _ = stream.write_all(&encode_answer(&answer)).await;
    let _ = stream.shutdown().await;
}
