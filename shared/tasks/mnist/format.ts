/** What one MNIST example is: a 28 × 28 grey digit (uint8 0..255, 0 = paper) and its class 0–9. */
export const MNIST_ROWS = 28;
export const MNIST_COLS = 28;
export const MNIST_PIXELS = MNIST_ROWS * MNIST_COLS;
/** The classes in output order: MNIST's labels. */
export const DIGIT_CLASSES = ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9'] as const;
export const MNIST_CLASSES = DIGIT_CLASSES.length;
/** The subset: the first 10,000 official training digits, the first 8,000 of a fixed shuffle train. */
export const SUBSET_TOTAL_DIGITS = 10_000;
export const SUBSET_TRAIN_DIGITS = 8_000;
