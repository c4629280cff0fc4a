fn main() {
    sandpit::timing::init();
    let code = sandpit::cli::main();
    sandpit::timing::mark("exit");
    std::process::exit(code);
}
