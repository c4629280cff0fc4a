fn main() {
    std::process::exit(sandpit::cli::main());
}
