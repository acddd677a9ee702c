//! Writing the report's CSV files through the `csv` crate: quoting as RFC 4180 asks (a field with
//! a comma, a quote or a line break in quotes, its quotes doubled), each file's row ending, and the
//! two things the crate does not do the way these files always have: figures printed as Rust's
//! `Display` prints them, and text a spreadsheet would run as a formula.

use serde::{Serialize, Serializer};

/// How a file ends its rows. measurements.csv and sessions.csv use CRLF (RFC 4180); rate.csv,
/// burst.csv and mixed_prefill.csv were first written with LF, and readers of them may rely on it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ending {
    Crlf,
    Lf,
}

/// One CSV file being written: its header, then rows of serde structs or tuples of them.
pub(crate) struct Table(csv::Writer<Vec<u8>>);

impl Table {
    pub(crate) fn new<H: AsRef<str>>(header: impl IntoIterator<Item = H>, ending: Ending) -> Table {
        let terminator = match ending {
            Ending::Crlf => csv::Terminator::CRLF,
            Ending::Lf => csv::Terminator::Any(b'\n'),
        };
        // the header is written here, not by `serialize`: csv writes none for a file without rows,
        // and measurements.csv's has columns that are not a struct's fields
        let mut wtr = csv::WriterBuilder::new().has_headers(false).terminator(terminator).from_writer(Vec::new());
        wtr.write_record(header.into_iter().map(|h| h.as_ref().to_string())).expect(WRITES);
        Table(wtr)
    }

    pub(crate) fn row(&mut self, row: impl Serialize) {
        self.0.serialize(row).expect(WRITES);
    }

    pub(crate) fn finish(self) -> String {
        let bytes = self.0.into_inner().expect(WRITES);
        String::from_utf8(bytes).expect("every field written was a str")
    }
}

/// Why writing cannot fail: the writer's sink is a `Vec`, and the rows are flat structs of scalars
/// with as many fields as the header (this module's tests write each kind).
const WRITES: &str = "a CSV row of scalars into a Vec";

/// A file of `R` rows under `R`'s header.
pub(crate) fn file<R: Serialize + Default>(rows: impl IntoIterator<Item = R>, ending: Ending) -> String {
    let mut table = Table::new(header::<R>(), ending);
    rows.into_iter().for_each(|r| table.row(r));
    table.finish()
}

/// `R`'s column names as csv takes them from its fields (serde renames included). csv writes a
/// header only before a first row, so a default row is written and the header read back.
pub(crate) fn header<R: Serialize + Default>() -> Vec<String> {
    let mut wtr = csv::Writer::from_writer(Vec::new());
    wtr.serialize(R::default()).expect("a row of named fields has a header");
    let bytes = wtr.into_inner().expect(WRITES);
    let mut rdr = csv::Reader::from_reader(bytes.as_slice());
    rdr.headers().expect("csv reads the header it wrote").iter().map(str::to_string).collect()
}

/// A figure as Rust's `Display` prints it (`2`, `0.1`, `1000000000000000000000`): csv's own
/// float format would write `2.0` and `1e21`, and the files never have.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Num(pub f64);

impl Serialize for Num {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

/// A figure that may be absent; empty where it is.
pub(crate) fn num(v: Option<f64>) -> Option<Num> {
    v.map(Num)
}

/// A figure that run.json would hold as null where it is not finite (JSON has no NaN or
/// infinity), so the CSV leaves it empty too.
pub(crate) fn finite(v: Option<f64>) -> Option<Num> {
    v.filter(|x| x.is_finite()).map(Num)
}

/// Text from the record (a label, a reason, a warning) that a spreadsheet shows as text: one that
/// starts with `=`, `+`, `-` or `@` and is not a number gets a `'` before it, else the spreadsheet
/// would evaluate it as a formula (CSV injection).
#[derive(Debug, Clone, Default)]
pub(crate) struct Guarded<S>(pub S);

impl<S: AsRef<str>> Serialize for Guarded<S> {
    fn serialize<Z: Serializer>(&self, s: Z) -> Result<Z::Ok, Z::Error> {
        let t = self.0.as_ref();
        if t.starts_with(['=', '+', '@', '-']) && t.parse::<f64>().is_err() {
            s.collect_str(&format_args!("'{t}"))
        } else {
            s.serialize_str(t)
        }
    }
}

/// Optional text, empty where absent.
pub(crate) fn guarded(s: &Option<String>) -> Guarded<&str> {
    Guarded(s.as_deref().unwrap_or(""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Default)]
    struct Row<'a> {
        name: Guarded<&'a str>,
        #[serde(rename = "value (ms)")]
        value: Option<Num>,
        count: Option<u64>,
    }

    fn one(name: &str, value: Option<f64>, ending: Ending) -> String {
        file([Row { name: Guarded(name), value: num(value), count: Some(3) }], ending)
    }

    #[test]
    fn quoting_guard_and_figures_as_the_files_always_had_them() {
        assert_eq!(one("plain", Some(2.0), Ending::Lf), "name,value (ms),count\nplain,2,3\n");
        assert_eq!(one("1,156 ms", None, Ending::Crlf), "name,value (ms),count\r\n\"1,156 ms\",,3\r\n");
        assert_eq!(
            one("say \"hi\"", Some(1e21), Ending::Lf).lines().nth(1),
            Some("\"say \"\"hi\"\"\",1000000000000000000000,3")
        );
        assert_eq!(one("=cmd()", Some(-0.5), Ending::Lf).lines().nth(1), Some("'=cmd(),-0.5,3"));
        assert_eq!(one("-1.5", None, Ending::Lf).lines().nth(1), Some("-1.5,,3"));
        assert_eq!(one("a\nb", None, Ending::Lf), "name,value (ms),count\n\"a\nb\",,3\n");
        assert!(finite(Some(f64::NAN)).is_none() && finite(Some(f64::INFINITY)).is_none());
    }

    #[test]
    fn a_file_without_rows_has_its_header() {
        assert_eq!(file(Vec::<Row>::new(), Ending::Crlf), "name,value (ms),count\r\n");
    }
}
