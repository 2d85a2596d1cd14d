"""This process and the machine it runs on: the installed packages and the hardware
(`environment`), the memory used (`usage`), what TensorFlow's import leaves out (`imports`), and
work in a fresh process of its own (`processes`)."""
