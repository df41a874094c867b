def main() -> None:
    print("roll")
