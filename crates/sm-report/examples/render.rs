//! Renders any accepted run file to HTML, Markdown and CSV (and the record
//! as read, `record.json`) without the
//! `speedmatrix` binary: `cargo run -p sm-report --example render -- RUN DIR`.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args_os().skip(1);
    let run = PathBuf::from(args.next().ok_or("usage: render RUN DIR")?);
    let dir = PathBuf::from(args.next().ok_or("usage: render RUN DIR")?);
    let record = sm_report::load_any(&run)?;
    std::fs::create_dir_all(&dir)?;
    let json = serde_json::to_string_pretty(&record)?;
    println!("wrote {}", sm_report::write_atomic(&dir.join("record.json"), &json)?.display());
    for p in sm_report::write_all(&record, &dir)? {
        println!("wrote {}", p.display());
    }
    print!("{}", sm_report::terminal(&record, 100));
    Ok(())
}
