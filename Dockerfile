# The book on a GPU machine: CUDA PyTorch, JupyterLab and the book, at the versions Binder pins.
#
#   docker build -t goodputlab .
#   docker run --gpus all --shm-size=2g -p 127.0.0.1:8888:8888 goodputlab
#
# then open the http://127.0.0.1:8888/lab?token=... address the container prints (through an SSH
# tunnel on a rented machine: README, "On a rented GPU machine").
#
# --gpus all needs the NVIDIA driver and the NVIDIA Container Toolkit on the host; the CUDA
# libraries come with the torch wheel (PyPI's Linux torch is a CUDA build). --shm-size: Docker
# gives a container 64 MB of /dev/shm, where the in-memory checkpoint tier (--ckpt memory) and the
# input pipeline's worker processes keep their buffers; 2 GB is enough for the large model.
FROM python:3.11-slim

# make, for `make dashboard` (Voila is in binder/requirements.txt)
RUN apt-get update && apt-get install -y --no-install-recommends make && rm -rf /var/lib/apt/lists/*

ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1
# the image holds everything the book needs: `make dashboard` and the other targets use it, no .venv
ENV GOODPUTLAB_ENV=system
WORKDIR /book

# dependencies first (a layer that survives edits to the chapters): every package at the version
# binder/requirements.txt pins, except torch, which is the CUDA build of constraints/cpu.txt's version
COPY pyproject.toml README.md LICENSE ./
COPY constraints/ constraints/
COPY binder/ binder/
RUN grep -v -e '^-' -e '^torch==' binder/requirements.txt > /tmp/pinned.txt \
 && pip install -c /tmp/pinned.txt "torch==$(sed -n 's/^torch==//p' constraints/cpu.txt)" \
 && pip install -c /tmp/pinned.txt $(sed -n '/^# the project/,/^# what they/p' binder/requirements.txt | grep -v -e '^#' -e '^torch==')

# the package and the book; binder/postBuild installs the package (no dependency changes) and
# switches JupyterLab's news feed off, as on Binder
COPY . .
RUN bash binder/postBuild

EXPOSE 8888
CMD ["jupyter", "lab", "--allow-root", "--no-browser", "--ip=0.0.0.0", "--port=8888", \
     "--ServerApp.root_dir=/book", "--LabApp.default_url=/lab/tree/book/01_what_is_goodput.ipynb"]
