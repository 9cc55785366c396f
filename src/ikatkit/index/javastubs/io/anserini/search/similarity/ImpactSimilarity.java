package io.anserini.search.similarity;

/** Compile-time signature of Anserini's class (its jar is built for Java 21, javac 11+ compiles against this). */
public class ImpactSimilarity extends org.apache.lucene.search.similarities.Similarity {
  public ImpactSimilarity() {}

  @Override
  public long computeNorm(org.apache.lucene.index.FieldInvertState state) {
    throw new UnsupportedOperationException("stub");
  }

  @Override
  public SimScorer scorer(float boost, org.apache.lucene.search.CollectionStatistics collectionStats,
                          org.apache.lucene.search.TermStatistics... termStats) {
    throw new UnsupportedOperationException("stub");
  }
}
