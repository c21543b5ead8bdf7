"""The run lifecycle: cluster control, images, generator, history recording, results, campaigns."""
