"""The mathematics, written once: responsibilities, algorithms, temperatures."""
