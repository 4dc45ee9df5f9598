# Image for docker-compose.yml: the CPU build its web, dispatcher, ray-head and ray-cpu services run. The GPU
# Ray node is Dockerfile.gpu (NGC PyTorch, whose Transformer Engine is preinstalled; not the `gpu` extra).
# PYTHON_VERSION / EXTRAS: docker-compose.yml builds it with Python 3.12 and the `ray` extra (the Ray cluster's
# Python must match the GPU image's).
ARG PYTHON_VERSION=3.11
FROM python:${PYTHON_VERSION}-slim
ARG EXTRAS=""
WORKDIR /srv
COPY pyproject.toml constraints.txt ./
COPY app app
COPY labs labs
RUN pip install --no-cache-dir -c constraints.txt --extra-index-url https://download.pytorch.org/whl/cpu ".${EXTRAS}"
COPY lessons lessons
COPY templates templates
COPY static static
COPY migrations migrations
COPY alembic.ini ./
# Production mode: the server refuses to start without COURSE_SECRET_KEY (a long random string, e.g.
# `python -c "import secrets; print(secrets.token_urlsafe(48))"`) and COURSE_PUBLIC_URL (the address learners
# use: every link that leaves the site is built from it), never falls back to the published
# development key, and sends its cookies with Secure (serve it behind HTTPS; COURSE_SECURE_COOKIES=0
# only for a plain-HTTP trial on a private network).
ENV COURSE_ENV=production \
    COURSE_DATA_DIR=/data
# Every service of this image (web, dispatcher, Ray head and CPU node) runs as `course`, not root: code that gets
# out of a lab's sandbox or through the web process owns only /data (job bundles, uploads: a new named volume takes
# this directory's owner) and /scratch (a Ray node's lab folders), not the image. A fixed uid, so a bind mount can
# be given to it (`chown 10001`).
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/course course \
 && mkdir -p /data /scratch \
 && chown course:course /data /scratch
USER course
EXPOSE 8000
CMD ["python", "-m", "app", "serve", "--host", "0.0.0.0", "--port", "8000"]
