//! The upload form: a token and a file, posted as multipart to `/upload`. The
//! token comes first in the form, so the site checks it before it reads the file.

use maud::html;

use super::{Nav, banner, shell};

/// The form, with the outcome of the last attempt above it when there was one.
pub fn page(error: Option<&str>) -> String {
    let body = html! {
        @if let Some(e) = error { (banner(e)) }
        p.caption {
            "A speedmatrix " code { "run.json" } ", an llm-inference-bench result JSON or a lil-bench-result/1 file \
             (gzip accepted), up to 32 MiB. Secrets in launch commands and environments are redacted again when the \
             run is stored."
        }
        form.panel.upload method="post" action="/upload" enctype="multipart/form-data" {
            label {
                "Upload token"
                input type="password" name="token" autocomplete="off" required placeholder="smt_…";
            }
            label { "Run file" input type="file" name="file" accept=".json,.gz,application/json" required; }
            p.hint {
                "Tokens come from the site's operator (" code { "speedmatrix serve token create --name NAME" }
                "); the run is published as uploaded by the token's name."
            }
            div.actions { button type="submit" { "Upload" } }
        }
        h2 { "From the command line" }
        pre.cmd { code { "speedmatrix upload RUN_DIR_OR_FILE --site URL --token TOKEN" } }
    };
    shell(Nav::Upload, "speedmatrix results", "Upload a run", body)
}
