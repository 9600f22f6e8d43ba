//! Workbench conventions without a backend: suspend, the new-job form's
//! choices, defaults and live re-checking.

use crate::tui::app::App;
use crate::tui::backend::JobSpec;
use crate::tui::config::{ConfigFile, Settings};
use crate::tui::screens::jobs::JobsPopup;
use crate::tui::screens::jobs::{draw_form, JobForm};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

fn app() -> App {
    App::new(Settings::resolve(&ConfigFile::default(), None, true).unwrap())
}

fn key(app: &mut App, code: KeyCode) {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE));
}

fn form_app(model: &str) -> App {
    let mut a = app();
    let spec = JobSpec {
        workspace: "ws.toml".into(),
        model: model.into(),
        dim: None,
        ..JobSpec::default()
    };
    a.jobs.popup = Some(JobsPopup::Form(JobForm::new("New training job", &spec)));
    a
}

fn form(a: &App) -> &JobForm {
    match &a.jobs.popup {
        Some(JobsPopup::Form(f)) => f,
        other => panic!("no form open: {other:?}"),
    }
}

#[test]
fn ctrl_z_asks_the_event_loop_to_suspend() {
    let mut a = app();
    a.on_key(KeyEvent::new(KeyCode::Char('z'), KeyModifiers::CONTROL));
    assert!(a.suspend);
    assert!(!a.quit);
}

#[test]
fn the_model_field_steps_through_the_registry() {
    let mut a = form_app("s2net");
    key(&mut a, KeyCode::Down); // focus: model
    let names = rosetta::jobs::model_names();
    let i = names.iter().position(|n| *n == "s2net").unwrap();
    key(&mut a, KeyCode::Right);
    assert_eq!(form(&a).fields[1].value, names[(i + 1) % names.len()]);
    key(&mut a, KeyCode::Left);
    key(&mut a, KeyCode::Left);
    assert_eq!(
        form(&a).fields[1].value,
        names[(i + names.len() - 1) % names.len()]
    );
}

#[test]
fn a_fixed_field_loses_its_error_without_another_enter() {
    let mut a = form_app("s2net");
    key(&mut a, KeyCode::Down);
    key(&mut a, KeyCode::Char('x')); // "s2netx": no such model
    key(&mut a, KeyCode::Enter);
    assert!(form(&a).fields[1].error.is_some(), "{:?}", form(&a).fields);
    key(&mut a, KeyCode::Backspace);
    assert_eq!(form(&a).fields[1].value, "s2net");
    assert_eq!(form(&a).fields[1].error, None);
}

#[test]
fn empty_fields_show_the_models_default_values() {
    let a = form_app("s2net");
    let mut t = Terminal::new(TestBackend::new(90, 20)).unwrap();
    t.draw(|f| draw_form(f, &a.settings.theme, form(&a)))
        .unwrap();
    let text: String = t
        .backend()
        .buffer()
        .content()
        .iter()
        .map(|c| c.symbol())
        .collect();
    let dim = rosetta::jobs::setting_default("s2net", "dim").unwrap();
    assert!(text.contains(&format!("(default {dim})")), "{text}");
    assert!(!text.contains("(model default)"));
    // a setting the model does not read says so
    assert_eq!(rosetta::jobs::setting_default("cl-lsi", "epochs"), None);
}

#[test]
fn y_copies_the_query_through_osc_52() {
    let mut a = app();
    a.switch_tab(crate::tui::app::Tab::Search);
    a.search.query = "the light of men".into();
    a.on_key(KeyEvent::new(KeyCode::Char('Y'), KeyModifiers::SHIFT));
    assert_eq!(a.clipboard.as_deref(), Some("the light of men"));
    assert_eq!(
        crate::tui::osc52("hi"),
        "\x1b]52;c;aGk=\x07",
        "OSC 52 with base64 text"
    );
    // nothing selected: no clipboard write, an error saying what Y copies
    let mut b = app();
    b.switch_tab(crate::tui::app::Tab::Data);
    b.on_key(KeyEvent::new(KeyCode::Char('Y'), KeyModifiers::SHIFT));
    assert_eq!(b.clipboard, None);
}
