//! The controllers the switch connects to, changeable while it runs: the
//! `--controller` targets, and those the OVSDB `Controller` rows name
//! (`ovs-vsctl set-controller`). Each target has its own connecting
//! thread; a target removed stops it and cuts its connection. The fail
//! mode (`standalone`/`secure`) can change too.

use super::{ControllerSpec, Registry, TlsContext};
use crate::shared::{ChannelControl, ControllerRow};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One controller target and its connecting thread.
pub(crate) struct Target {
    /// Where it connects.
    pub spec: ControllerSpec,
    /// From `--controller` (kept whatever OVSDB says).
    pub fixed: bool,
    /// Set to stop its thread.
    pub stop: Arc<AtomicBool>,
    /// A clone of its live connection, to cut it when the target goes.
    pub live: Arc<Mutex<Option<super::Conn>>>,
    /// True while connected (OVSDB's `Controller.is_connected`).
    pub connected: Arc<AtomicBool>,
    /// Its connections' inactivity probe (ms; 0: none), changeable.
    pub probe_ms: Arc<AtomicU64>,
    /// Its longest wait between connection attempts (ms), changeable.
    pub max_backoff_ms: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Registry {
    pub(super) fn targets(&self) -> std::sync::MutexGuard<'_, Vec<Target>> {
        self.targets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts connecting to `spec`.
    pub(super) fn add_target(
        self: &Arc<Self>,
        spec: ControllerSpec,
        fixed: bool,
        tls: Option<Arc<TlsContext>>,
    ) -> Result<(), String> {
        let stop = Arc::new(AtomicBool::new(false));
        let live = Arc::new(Mutex::new(None));
        let connected = Arc::new(AtomicBool::new(false));
        let probe_ms = Arc::new(AtomicU64::new(self.cfg.probe_s.saturating_mul(1000)));
        let max_backoff_ms = Arc::new(AtomicU64::new(
            self.cfg.max_backoff_s.max(1).saturating_mul(1000),
        ));
        let (reg, t2) = (self.clone(), spec.clone());
        let timers = Timers {
            stop: stop.clone(),
            live: live.clone(),
            connected: connected.clone(),
            probe_ms: probe_ms.clone(),
            max_backoff_ms: max_backoff_ms.clone(),
        };
        let thread = super::spawn("of-connect", move || {
            connect_loop(&reg, &t2, tls.as_deref(), &timers)
        })?;
        self.targets().push(Target {
            spec,
            fixed,
            stop,
            live,
            connected,
            probe_ms,
            max_backoff_ms,
            thread: Some(thread),
        });
        Ok(())
    }

    /// Stops every target's thread (the switch's stop flag is set) and
    /// waits for them.
    pub(super) fn join_targets(&self) {
        let threads: Vec<JoinHandle<()>> = self
            .targets()
            .iter_mut()
            .filter_map(|t| {
                t.stop.store(true, Ordering::Relaxed);
                t.thread.take()
            })
            .collect();
        for t in threads {
            let _ = t.join();
        }
    }
}

/// What OVSDB's side uses: a weak handle on the channel.
pub(crate) struct Handle {
    pub reg: Weak<Registry>,
    pub tls: Option<Arc<TlsContext>>,
}

impl ChannelControl for Handle {
    fn set_controllers(&self, rows: &[ControllerRow]) -> Result<(), String> {
        let Some(reg) = self.reg.upgrade() else {
            return Ok(());
        };
        let mut want = Vec::new();
        for r in rows {
            want.push(ControllerSpec::parse(&r.target).map_err(|e| format!("controller {e}"))?);
        }
        // Removed: stopped and cut (the thread ends on its own).
        let gone: Vec<Target> = {
            let mut all = reg.targets();
            let (keep, gone) = std::mem::take(&mut *all)
                .into_iter()
                .partition(|t| t.fixed || want.contains(&t.spec));
            *all = keep;
            gone
        };
        for t in gone {
            t.stop.store(true, Ordering::Relaxed);
            if let Some(c) = t.live.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
                c.shutdown();
            }
        }
        let have: Vec<ControllerSpec> = reg.targets().iter().map(|t| t.spec.clone()).collect();
        for spec in want {
            if !have.contains(&spec) {
                if matches!(spec, ControllerSpec::Ssl(_)) && self.tls.is_none() {
                    return Err(format!(
                        "controller {spec:?}: ssl: needs --private-key, --certificate and --ca-cert"
                    ));
                }
                reg.add_target(spec, false, self.tls.clone())?;
            }
        }
        // The rows' timers (OVS's defaults where a row has none).
        for (spec, r) in want_specs(rows) {
            if let Some(t) = reg.targets().iter().find(|t| !t.fixed && t.spec == spec) {
                let probe = r.probe_ms.unwrap_or(reg.cfg.probe_s.saturating_mul(1000));
                let backoff = r
                    .max_backoff_ms
                    .unwrap_or(reg.cfg.max_backoff_s.saturating_mul(1000))
                    .max(1000);
                t.probe_ms.store(probe, Ordering::Relaxed);
                t.max_backoff_ms.store(backoff, Ordering::Relaxed);
            }
        }
        reg.refresh();
        Ok(())
    }

    fn set_fail_standalone(&self, on: bool) {
        if let Some(reg) = self.reg.upgrade() {
            if reg.fail_standalone.swap(on, Ordering::Relaxed) != on {
                reg.refresh();
            }
        }
    }

    fn reconnect(&self) {
        if let Some(reg) = self.reg.upgrade() {
            for t in reg.targets().iter() {
                if let Some(c) = t.live.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
                    c.shutdown();
                }
            }
        }
    }

    fn set_versions(&self, bitmap: u32) {
        if let Some(reg) = self.reg.upgrade() {
            let all = flowpath_openflow::msg::all_versions();
            let b = if bitmap & all == 0 { all } else { bitmap & all };
            reg.versions.store(b, Ordering::Relaxed);
        }
    }

    fn set_datapath_id(&self, dpid: u64) {
        if let Some(reg) = self.reg.upgrade() {
            reg.dpid.store(dpid, Ordering::Relaxed);
        }
    }

    fn controllers(&self) -> Vec<(String, bool)> {
        let Some(reg) = self.reg.upgrade() else {
            return Vec::new();
        };
        let out = reg
            .targets()
            .iter()
            .map(|t| (t.spec.to_string(), t.connected.load(Ordering::Relaxed)))
            .collect();
        out
    }
}

/// Connects to `target` and serves the connection, again and again with
/// a back-off, until the switch stops or `stop` is set (the target was
/// removed); the live connection is kept in `live` (to cut it) and
/// `connected` says whether there is one.
/// What a target's connecting thread shares with the rest: its stop flag,
/// its live connection, whether it is connected, its timers.
pub(super) struct Timers {
    stop: Arc<AtomicBool>,
    live: Arc<Mutex<Option<super::Conn>>>,
    connected: Arc<AtomicBool>,
    probe_ms: Arc<AtomicU64>,
    max_backoff_ms: Arc<AtomicU64>,
}

/// Each row's target parsed (rows that do not parse are left out: the
/// caller refused them already).
fn want_specs(rows: &[ControllerRow]) -> Vec<(ControllerSpec, &ControllerRow)> {
    rows.iter()
        .filter_map(|r| ControllerSpec::parse(&r.target).ok().map(|s| (s, r)))
        .collect()
}

pub(super) fn connect_loop(
    reg: &Arc<Registry>,
    target: &ControllerSpec,
    tls: Option<&TlsContext>,
    timers: &Timers,
) {
    let (stop, live, connected) = (&timers.stop, &timers.live, &timers.connected);
    let mut backoff = Duration::from_secs(1);
    let stopped = || reg.sh.stop.load(Ordering::Relaxed) || stop.load(Ordering::Relaxed);
    while !stopped() {
        let c = match target {
            ControllerSpec::Tcp(a) => a
                .parse()
                .ok()
                .and_then(|sa| TcpStream::connect_timeout(&sa, Duration::from_secs(2)).ok())
                .map(super::Conn::Tcp),
            ControllerSpec::Unix(p) => UnixStream::connect(p).ok().map(super::Conn::Unix),
            ControllerSpec::Ssl(a) => {
                a.parse::<std::net::SocketAddr>()
                    .ok()
                    .zip(tls)
                    .and_then(|(sa, ctx)| {
                        let s = TcpStream::connect_timeout(&sa, Duration::from_secs(2)).ok()?;
                        super::TlsConn::client(s, ctx, sa.ip())
                            .ok()
                            .map(super::Conn::Tls)
                    })
            }
        };
        if let Some(c) = c {
            backoff = Duration::from_secs(1);
            *live.lock().unwrap_or_else(|p| p.into_inner()) = c.try_clone().ok();
            connected.store(true, Ordering::Relaxed);
            super::serve(reg, c, true, timers.probe_ms.clone());
            connected.store(false, Ordering::Relaxed);
            *live.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
        let until = Instant::now() + backoff;
        while Instant::now() < until && !stopped() {
            std::thread::sleep(super::POLL);
        }
        let max = Duration::from_millis(timers.max_backoff_ms.load(Ordering::Relaxed).max(1000));
        backoff = (backoff * 2).min(max);
    }
}
