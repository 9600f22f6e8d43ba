//! The terminal workbench (`rosetta` with no subcommand): jobs with live
//! curves, search, neighbours, compare and data screens.
//!
//! Structure: [`app::App`] is the shell (no terminal) routing keys and
//! answers to the screens ([`screens`], each a [`screens::Screen`] with its
//! own state, messages and drawing), [`ui`] draws the frame around them, [`backend::Backend`] is everything it asks of the engine,
//! and [`run`] is the event loop: a thread reads terminal events, worker
//! threads (tokio's blocking pool) run backend requests, and both report
//! through one channel, so the UI thread never waits on compute or disk.

pub mod app;
pub mod backend;
pub mod config;
pub mod keymap;
pub mod local;
pub mod log;
pub mod screens;
pub mod state;
pub mod ui;
pub mod widgets;

use std::io::IsTerminal;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, OnceLock};
use std::time::{Duration, Instant};

use crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use crossterm::ExecutableCommand;
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

use app::{App, Reply};
use backend::Backend;
pub use config::default_config_text;
use config::{ConfigFile, Settings};

use rosetta::{Error, Result};

/// How the workbench was started.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--theme` flag (`dark` / `light`).
    pub theme: Option<String>,
    /// Config file (default: XDG config dir).
    pub config: Option<PathBuf>,
    /// `--sessions`: the sessions folder, over the config file's `sessions_dir`.
    pub sessions: Option<PathBuf>,
}

/// Shortest time between two frames for background updates (at most ~10
/// redraws a second).
pub const FRAME: Duration = Duration::from_millis(100);
/// Shortest time between two frames after a key or mouse event, so typing
/// feels immediate while bursts are still coalesced.
pub const INPUT_FRAME: Duration = Duration::from_millis(16);
/// How often the sessions root is rescanned.
pub const RESCAN: Duration = Duration::from_secs(2);
/// How often metrics files of shown sessions are tailed.
pub const TAIL: Duration = Duration::from_millis(500);

enum Msg {
    /// A terminal event and when the input thread read it.
    Input(crossterm::event::Event, Instant),
    InputError(String),
    /// An intermediate answer (progress).
    Reply(Reply),
    /// The final answer to the work of a ticket.
    Done(u64, Reply),
}

fn restore_terminal() {
    let mut out = std::io::stdout();
    let _ = out.execute(DisableMouseCapture);
    let _ = out.execute(LeaveAlternateScreen);
    let _ = disable_raw_mode();
    let _ = out.execute(crossterm::cursor::Show);
}

/// The OSC 52 sequence that puts `text` on the terminal's clipboard.
pub(crate) fn osc52(text: &str) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
    format!("\x1b]52;c;{b64}\x07")
}

/// Ctrl-Z: restores the terminal, stops this process with SIGTSTP (the
/// shell's job control takes over), and takes the terminal back when the
/// process is continued (`fg`).
fn suspend(terminal: &mut Terminal<CrosstermBackend<std::io::Stdout>>) -> std::io::Result<()> {
    restore_terminal();
    // SAFETY: raising a signal at ourselves; SIGTSTP's default action stops
    // the process until SIGCONT.
    unsafe {
        libc::raise(libc::SIGTSTP);
    }
    enable_raw_mode()?;
    let out = terminal.backend_mut();
    out.execute(EnterAlternateScreen)?;
    out.execute(EnableMouseCapture)?;
    out.execute(crossterm::cursor::Hide)?;
    terminal.clear()
}

/// Opens the workbench on this terminal and runs until the user quits.
/// Errors if stdin/stdout are not terminals (nothing is drawn then).
pub fn run(opts: Options) -> Result<()> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(Error::invalid(
            "the workbench needs a terminal (stdin and stdout are not both terminals); \
             see `rosetta --help` for the commands",
        ));
    }
    let cfg_path = opts.config.clone().unwrap_or_else(config::default_path);
    let file = ConfigFile::load(&cfg_path)?;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let mut settings = Settings::resolve(&file, opts.theme.as_deref(), no_color)
        .map_err(|e| Error::file(&cfg_path, e.to_string()))?;
    if let Some(dir) = opts.sessions {
        settings.sessions_dir = dir;
    }
    if settings.workspace.is_empty() && Path::new(config::SETUP_WORKSPACE).is_file() {
        settings.workspace = config::SETUP_WORKSPACE.to_string();
    }
    let log_path = log::default_path();
    if let Err(e) = log::open(log_path.clone()) {
        return Err(Error::io(&log_path, e));
    }
    log::info(&format!(
        "workbench starting (config {})",
        cfg_path.display()
    ));
    settings.state_file = Some(state::default_path());
    let exe = std::env::current_exe().map_err(|e| Error::io("current_exe", e))?;
    let backend: Arc<dyn Backend> = Arc::new(
        local::LocalBackend::new(settings.sessions_dir.clone(), exe)
            .with_encode_limit(settings.encode_limit_s),
    );

    // A panic on the UI thread restores the terminal, then prints the
    // message and the log path. A panic on a worker thread is only logged
    // (printing would tear the screen); the request answers with an error.
    static UI_THREAD: OnceLock<std::thread::ThreadId> = OnceLock::new();
    let _ = UI_THREAD.set(std::thread::current().id());
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        log::info(&format!("panic: {info}"));
        if UI_THREAD.get() == Some(&std::thread::current().id()) {
            restore_terminal();
            default_hook(info);
            if let Some(p) = log::path() {
                eprintln!("rosetta: the workbench crashed; details in {}", p.display());
            }
        }
    }));

    enable_raw_mode().map_err(|e| Error::io("terminal", e))?;
    let mut stdout = std::io::stdout();
    let setup = stdout
        .execute(EnterAlternateScreen)
        .and_then(|o| o.execute(EnableMouseCapture).map(|_| ()));
    let result = setup
        .map_err(|e| Error::io("terminal", e))
        .and_then(|_| event_loop(settings, backend));
    restore_terminal();
    let _ = std::panic::take_hook();
    log::info(&format!("workbench exiting: {:?}", result.as_ref().err()));
    result
}

/// Clears the screen and makes the next frame write every cell.
///
/// Not `Terminal::clear`: that first asks the terminal where its cursor is
/// (`ESC [ 6 n`) and waits for the answer on crossterm's event reader, which
/// the input thread holds while it polls (200 ms at a time). Every screen
/// change and every search or neighbours answer (which repaint fully) then
/// took up to 200 ms to show, and a lost answer ended the workbench with an
/// error. The cursor is hidden, so there is nothing to restore.
fn repaint_all(terminal: &mut Terminal<CrosstermBackend<std::io::Stdout>>) -> std::io::Result<()> {
    ratatui::backend::Backend::clear_region(
        terminal.backend_mut(),
        ratatui::backend::ClearType::All,
    )?;
    // Between frames the current buffer is blank; swapping blanks the
    // previous one too, so the next frame is diffed against nothing.
    terminal.swap_buffers();
    Ok(())
}

fn event_loop(settings: Settings, backend: Arc<dyn Backend>) -> Result<()> {
    let mut terminal = Terminal::new(CrosstermBackend::new(std::io::stdout()))
        .map_err(|e| Error::io("terminal", e))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .max_blocking_threads(4)
        .enable_time()
        .build()
        .map_err(|e| Error::io("tokio runtime", e))?;
    let (tx, rx) = mpsc::channel::<Msg>();
    let stop = Arc::new(AtomicBool::new(false));
    let input = {
        let tx = tx.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match crossterm::event::poll(Duration::from_millis(200)) {
                    Ok(true) => match crossterm::event::read() {
                        Ok(ev) => {
                            if tx.send(Msg::Input(ev, Instant::now())).is_err() {
                                break;
                            }
                        }
                        Err(e) => {
                            let _ = tx.send(Msg::InputError(e.to_string()));
                            break;
                        }
                    },
                    Ok(false) => {}
                    Err(e) => {
                        let _ = tx.send(Msg::InputError(e.to_string()));
                        break;
                    }
                }
            }
        })
    };

    // SIGTERM / SIGHUP end the workbench like `q` (terminal restored).
    let signalled = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
        signal_hook::flag::register(sig, signalled.clone())
            .map_err(|e| Error::io("signal handler", e))?;
    }
    let mut app = App::new(settings);
    app.restore_ui_state();
    let mut last_draw = Instant::now() - FRAME;
    // first input event not yet drawn, for the key-to-draw latency figures
    let mut input_at: Option<Instant> = None;
    let mut latencies: Vec<f64> = Vec::new();
    let mut next_scan = Instant::now() + RESCAN;
    let mut next_tail = Instant::now();
    let mut result = Ok(());
    loop {
        app.persist_ui_state();
        for app::Work {
            ticket,
            request: req,
        } in app.take_work()
        {
            let b = backend.clone();
            let tx = tx.clone();
            rt.spawn_blocking(move || {
                let t = tx.clone();
                let progress = move |r: Reply| {
                    let _ = t.send(Msg::Reply(r));
                };
                let r2 = req.clone();
                let reply = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    app::execute(&*b, req, &progress)
                }))
                .unwrap_or_else(|p| {
                    let msg = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "unknown panic".into());
                    app::failed(&r2, format!("internal error: {msg} (see the log)"))
                });
                let _ = tx.send(Msg::Done(ticket, reply));
            });
        }
        if app.quit {
            break;
        }
        if std::mem::take(&mut app.suspend) {
            log::info("suspended (Ctrl-Z)");
            if let Err(e) = suspend(&mut terminal) {
                result = Err(Error::io("terminal", e));
                break;
            }
            app.full_redraw = true;
            app.dirty = true;
        }
        if let Some(text) = app.clipboard.take() {
            use std::io::Write;
            let mut out = std::io::stdout();
            let _ = out
                .write_all(osc52(&text).as_bytes())
                .and_then(|_| out.flush());
        }
        if std::mem::take(&mut app.bell) {
            use std::io::Write;
            let mut out = std::io::stdout();
            let _ = out.write_all(b"\x07").and_then(|_| out.flush());
        }
        if signalled.load(Ordering::Relaxed) {
            log::info("terminated by a signal");
            break;
        }
        let now = Instant::now();
        let frame = if input_at.is_some() {
            INPUT_FRAME
        } else {
            FRAME
        };
        // the busy mark's spinner turns once a frame while work is in flight
        if app.is_busy() && now >= last_draw + FRAME {
            app.dirty = true;
        }
        if app.dirty && now >= last_draw + frame {
            let t0 = Instant::now();
            if std::mem::take(&mut app.full_redraw) {
                if let Err(e) = repaint_all(&mut terminal) {
                    result = Err(Error::io("terminal", e));
                    break;
                }
            }
            if let Err(e) = terminal.draw(|f| ui::draw(f, &mut app)) {
                result = Err(Error::io("terminal", e));
                break;
            }
            app.dirty = false;
            last_draw = Instant::now();
            if let Some(t) = input_at.take() {
                latencies.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            let ms = t0.elapsed().as_secs_f64() * 1000.0;
            if ms > 50.0 {
                log::info(&format!("slow frame: {ms:.1} ms"));
            }
        }
        let mut deadline = next_scan.min(next_tail);
        if app.dirty {
            deadline = deadline.min(last_draw + frame);
        } else if app.is_busy() {
            deadline = deadline.min(last_draw + FRAME);
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Ok(msg) => {
                let mut handle = |m: Msg, app: &mut App| -> Option<String> {
                    match m {
                        Msg::Input(ev, read_at) => {
                            // from the moment the key was read, so that a
                            // busy UI thread counts too
                            input_at.get_or_insert(read_at);
                            app.on_event(ev)
                        }
                        Msg::Reply(r) => app.on_reply(r),
                        Msg::Done(t, r) => app.on_done(t, r),
                        Msg::InputError(e) => return Some(e),
                    }
                    None
                };
                if let Some(e) = handle(msg, &mut app) {
                    result = Err(Error::invalid(format!("reading the terminal: {e}")));
                    break;
                }
                // Take everything already queued before drawing.
                while let Ok(m) = rx.try_recv() {
                    if let Some(e) = handle(m, &mut app) {
                        result = Err(Error::invalid(format!("reading the terminal: {e}")));
                        break;
                    }
                }
                if result.is_err() {
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        let now = Instant::now();
        if now >= next_scan {
            app.poll_sessions();
            next_scan = now + RESCAN;
        }
        if now >= next_tail {
            app.poll_metrics();
            next_tail = now + TAIL;
        }
    }
    stop.store(true, Ordering::Relaxed);
    if !latencies.is_empty() {
        latencies.sort_by(f64::total_cmp);
        let q = |p: f64| latencies[((latencies.len() - 1) as f64 * p).round() as usize];
        log::info(&format!(
            "input-to-draw latency over {} frames: median {:.2} ms, p95 {:.2} ms, max {:.2} ms",
            latencies.len(),
            q(0.5),
            q(0.95),
            q(1.0)
        ));
    }
    // Requests queued at quit (cancelling jobs, remembering marks) run
    // before we leave.
    app.persist_ui_state();
    for req in app.take_requests() {
        if matches!(
            req,
            app::Request::Jobs(screens::jobs::Request::Cancel(_))
                | app::Request::SaveUiState { .. }
        ) {
            let reply = app::execute(&*backend, req, &|_| {});
            log::info(&format!("at quit: {reply:?}"));
        }
    }
    // Not joined: on a hung-up terminal crossterm's read can spin without
    // returning, and waiting for it kept a terminal-less workbench alive at
    // full CPU (ignoring SIGTERM). The thread ends with the process.
    drop(input);
    rt.shutdown_timeout(Duration::from_millis(100));
    result
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_conventions;
