//! The upload form: a token and a file, posted as multipart to `/upload`. The
//! token comes first in the form, so the site checks it before it reads the file.

use std::fmt::Write;

use super::{Nav, esc, shell};

/// The form, with the outcome of the last attempt above it when there was one.
pub fn page(error: Option<&str>) -> String {
    let mut s = String::new();
    if let Some(e) = error {
        let _ = writeln!(s, "<p class=\"banner\" role=\"alert\">{}</p>", esc(e));
    }
    s.push_str(
        "<p class=\"caption\">A speedmatrix <code>run.json</code>, an llm-inference-bench result JSON or a \
         lil-bench-result/1 file (gzip accepted), up to 32 MiB. Secrets in launch commands and environments are \
         redacted again when the run is stored.</p>\n\
         <form class=\"panel upload\" method=\"post\" action=\"/upload\" enctype=\"multipart/form-data\">\n\
         <label>Upload token<input type=\"password\" name=\"token\" autocomplete=\"off\" required placeholder=\"smt_…\"></label>\n\
         <label>Run file<input type=\"file\" name=\"file\" accept=\".json,.gz,application/json\" required></label>\n\
         <p class=\"hint\">Tokens come from the site's operator (<code>speedmatrix serve token create --name NAME</code>); \
         the run is published as uploaded by the token's name.</p>\n\
         <div class=\"actions\"><button type=\"submit\">Upload</button></div>\n</form>\n\
         <h2>From the command line</h2>\n\
         <pre class=\"cmd\"><code>speedmatrix upload RUN_DIR_OR_FILE --site URL --token TOKEN</code></pre>\n",
    );
    shell(Nav::Upload, "speedmatrix results", "Upload a run", &s)
}
