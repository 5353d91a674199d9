// `sqlx::migrate!` embeds the migration files at compile time; without this, adding a
// migration file does not trigger a rebuild and the new migration is silently missing.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
