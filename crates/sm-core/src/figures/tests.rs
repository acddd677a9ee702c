//! The docs' list of figures is the tables': docs/methodology.md §7.6 is generated from
//! [`sections`], so a figure added to a table fails this test until its line is there.

use super::sections;

const BEGIN: &str = "<!-- figures:begin -->\n";
const END: &str = "<!-- figures:end -->";

/// The list as docs/methodology.md holds it between its markers.
fn list() -> String {
    let mut s = String::from("| Section | Figure | Unit | Carried by |\n|---|---|---|---|\n");
    for section in sections() {
        for f in &section.figures {
            s += &format!("| `{}` | `{}` | {} | {} |\n", section.path, f.name, f.unit.symbol(), f.carried.words());
        }
    }
    s
}

#[test]
fn the_docs_list_every_figure_of_every_table() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/methodology.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let start = doc.find(BEGIN).expect("methodology.md has the figure list's markers") + BEGIN.len();
    let end = start + doc[start..].find(END).expect("the list's end marker");
    let want = list();
    if doc[start..end] != want && std::env::var_os("SPEEDMATRIX_BLESS").is_some() {
        std::fs::write(path, format!("{}{want}{}", &doc[..start], &doc[end..])).unwrap();
        return;
    }
    assert_eq!(
        doc[start..end],
        want,
        "docs/methodology.md §7.6 differs from the tables: SPEEDMATRIX_BLESS=1 rewrites it"
    );
}
