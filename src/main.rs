fn main() {
    println!("rankd");
}
