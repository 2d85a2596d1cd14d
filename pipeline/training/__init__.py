"""Training under tf.distribute: the models (`models`), devices and strategies (`distribute`),
several hosts (`cluster`), Keras `fit` and the custom loop (`trainer`, `custom_loop`), resume
(`resume`), the best epoch (`early_stopping`), the model folder (`model_folder`), the test
metrics (`evaluation`) and the figures (`plots`)."""
