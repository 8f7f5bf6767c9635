#!/usr/bin/env bash
# Builds what bench/jvm_connector.py compares against (not part of the package or its tests): StreamNative's
# pulsar-spark connector for Spark 3.5 / Scala 2.12, and a venv with PySpark 3.5 to run it, as jvm_connector.py's
# docstring describes. Usage: bench/build_jvm_connector.sh [pulsar-spark git URL or mirror path] [work dir]
# Prints the two arguments jvm_connector.py takes (--jar, --spark35-python).
set -euo pipefail
SOURCE=${1:-https://github.com/streamnative/pulsar-spark.git}
WORK=${2:-/tmp/pulsar-spark-bench}
COMMIT=8df8804dbf699b26eb1047a17f91a805e497e8c4  # branch neng/upgrade-spark-3.5.6: Spark 3.5.6, Pulsar client 4.0.5
mkdir -p "$WORK"
if [ ! -d "$WORK/pulsar-spark/.git" ]; then
    git clone -q "$SOURCE" "$WORK/pulsar-spark"
fi
cd "$WORK/pulsar-spark"
git checkout -q -f "$COMMIT"
# Two local patches of pom.xml (why: jvm_connector.py's docstring):
# 1. Scala 2.12 needs scala-collection-compat for scala.jdk.CollectionConverters (Spark 3.5's jars ship it: provided);
# 2. no relocation of javax.xml (with it the shaded admin client never answers).
python3 - <<'PY'
import re
pom = open("pom.xml").read()
compat = ("<dependencies>\n    <dependency>\n      <groupId>org.scala-lang.modules</groupId>\n"
          "      <artifactId>scala-collection-compat_2.12</artifactId>\n      <version>2.7.0</version>\n"
          "      <scope>provided</scope>\n    </dependency>")
if "scala-collection-compat_2.12" not in pom:
    pom = pom.replace("<dependencies>", compat, 1)
pom = re.sub(r"\s*<relocation>\s*<pattern>javax\.xml</pattern>\s*<shadedPattern>[^<]*</shadedPattern>\s*</relocation>", "", pom)
open("pom.xml", "w").write(pom)
PY
mvn -q -B -Dmaven.test.skip=true -Dscala.version=2.12.18 -Dscala.binary.version=2.12 -Dspark.version=3.5.6 \
    -Dmaven.javadoc.skip=true -Dlicense.skip=true -Dscalastyle.skip=true package
# The shaded jar keeps the pom's artifact name (_2.13) though it is compiled for 2.12.
JAR="$WORK/pulsar-spark-connector_2.12-3.5.6-SNAPSHOT-local.jar"
cp target/pulsar-spark-connector_2.13-3.5.6-SNAPSHOT.jar "$JAR"
if [ ! -x "$WORK/spark35/bin/python" ]; then
    python3 -m venv "$WORK/spark35"
    "$WORK/spark35/bin/pip" install -q "pyspark==3.5.*"
fi
echo "--jar $JAR --spark35-python $WORK/spark35/bin/python"
