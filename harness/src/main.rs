fn main() {
    println!("tiercheck");
}
