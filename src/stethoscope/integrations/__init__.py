"""One-line adapters for the trainers people already call: `stethoscope.integrations.hf.StethoscopeCallback`
(transformers' Trainer) and `stethoscope.integrations.lightning.StethoscopeCallback` (Lightning).

Both drive a real `stethoscope.Monitor` and carry out its `Control` requests through the framework's
own controls. Importing this package loads no framework; a framework that is not installed is one
line naming the extra to install.
"""
